package images

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"klab/images/apt"
	"klab/images/kerneldir"
	"klab/images/keyed"
	"klab/internal/paths"
	"klab/internal/proc"
	"klab/internal/units"
	"klab/results"
)

// Debian kernels: see FetchDebian for the references understood and the
// cache layout. Everything apt does runs through package images/apt, with
// a private configuration under <cache>/apt; the host's apt state is never
// touched.

// DefaultDebianFlavour is the kernel flavour used when none is given.
const DefaultDebianFlavour = "cloud-amd64"

// debianSuites are the suites searched for kernels, oldest first.
func debianSuites() []string {
	return []string{"bookworm", "trixie", "trixie-backports", "sid"}
}

// DebianOptions tunes FetchDebian.
type DebianOptions struct {
	// Mirror is the Debian archive URI. Empty means $KLAB_DEBIAN_MIRROR,
	// else the host's apt sources (see apt.ResolveMirror). It is only
	// consulted when the network is needed.
	Mirror string
	// AptRoot is the root directory whose etc/apt sources name the mirror
	// when neither Mirror nor $KLAB_DEBIAN_MIRROR does; empty means "/",
	// the host's own.
	AptRoot string
	// CacheDir is klab's cache directory; empty means paths.CacheDir().
	CacheDir string
	// Flavour is the kernel flavour: "cloud-amd64" (the default),
	// "amd64" or "rt-amd64".
	Flavour string
	// Refresh forces the package lists to be updated and the reference
	// to be resolved again, instead of using the cached answer.
	Refresh bool
	// Progress receives one line per step; nil discards them.
	Progress io.Writer

	// aptStage replaces /var/cache/klab for apt's staging directories
	// (see apt.Options.StageRoot), for tests.
	aptStage string
}

func (o *DebianOptions) cacheDir() string {
	if o.CacheDir != "" {
		return o.CacheDir
	}
	return paths.CacheDir()
}

// mirror resolves the Debian archive URI (see apt.ResolveMirror).
func (o *DebianOptions) mirror() (string, error) { return apt.ResolveMirror(o.Mirror, o.AptRoot) }

func (o *DebianOptions) logf(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// debianRef is a parsed "debian:..." reference.
type debianRef struct {
	// Series is "7.3" for debian:7.3, empty for an exact release.
	Series string
	// Release is the exact kernel release, e.g. "7.3.4+deb13-cloud-amd64".
	Release string
	// PkgVersion pins the package version, when given with "=".
	PkgVersion string
	// Flavour is the kernel flavour.
	Flavour string
}

// kverPattern matches the version part of a kernel release: 6.1.0-50,
// 7.3.4+deb13, 6.1.0-0.deb11.17.
const kverPattern = `[0-9]+\.[0-9]+(?:\.[0-9]+)*(?:-[0-9][0-9a-z.]*)?(?:\+[0-9a-z.~]+)?`

// Compiled once, never modified.
var (
	seriesRe  = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)
	releaseRe = regexp.MustCompile(`^(` + kverPattern + `)(?:-([a-z][a-z0-9-]*))?$`)
	// kverOnlyRe matches the version part of a release, e.g. 6.1.0-50 or
	// 7.3.4+deb13, never a release with a flavour (6.1.0-50-cloud).
	kverOnlyRe = regexp.MustCompile(`^` + kverPattern + `$`)
)

func validFlavour(f string) bool {
	switch f {
	case "cloud-amd64", "amd64", "rt-amd64":
		return true
	}
	return false
}

// parseDebianRef parses ref with or without its "debian:" prefix.
func parseDebianRef(ref, flavour string) (debianRef, error) {
	if flavour == "" {
		flavour = DefaultDebianFlavour
	}
	if !validFlavour(flavour) {
		return debianRef{}, fmt.Errorf("unknown Debian kernel flavour %q: want cloud-amd64, amd64 or rt-amd64", flavour)
	}
	s := strings.TrimPrefix(ref, "debian:")
	s = strings.TrimPrefix(s, "linux-image-")
	s, pin, pinned := strings.Cut(s, "=")
	if pinned && pin == "" {
		return debianRef{}, fmt.Errorf("kernel %q: empty package version after '='", ref)
	}
	if seriesRe.MatchString(s) {
		if pinned {
			return debianRef{}, fmt.Errorf("kernel %q: a package version can only pin an exact release such as debian:7.3.4+deb13-cloud-amd64=7.3.4-1", ref)
		}
		return debianRef{Series: s, Flavour: flavour}, nil
	}
	m := releaseRe.FindStringSubmatch(s)
	if m == nil {
		return debianRef{}, fmt.Errorf("bad Debian kernel %q: want debian:<series> such as debian:7.3, or debian:<kernel release> such as debian:7.3.4+deb13-cloud-amd64", ref)
	}
	if m[2] != "" {
		if !validFlavour(m[2]) {
			return debianRef{}, fmt.Errorf("kernel %q: unknown flavour %q: want cloud-amd64, amd64 or rt-amd64", ref, m[2])
		}
		flavour = m[2]
	}
	return debianRef{Release: m[1] + "-" + flavour, PkgVersion: pin, Flavour: flavour}, nil
}

// key is the reference's name in the alias index.
func (r debianRef) key() string {
	if r.Series != "" {
		return r.Series + "/" + r.Flavour
	}
	if r.PkgVersion != "" {
		return r.Release + "=" + r.PkgVersion
	}
	return r.Release
}

// String is the canonical reference.
func (r debianRef) String() string {
	if r.Series != "" {
		if r.Flavour != DefaultDebianFlavour {
			return "debian:" + r.Series + " (" + r.Flavour + ")"
		}
		return "debian:" + r.Series
	}
	return "debian:" + r.key()
}

// FetchDebian returns the Debian kernel that ref names, downloading and
// installing it into the cache when needed. The returned Kernel's Name is
// ref. References ("debian:" may be left out):
//
//   - debian:<series>, e.g. debian:7.3 or debian:6.1: the newest kernel of
//     that upstream series in the suites bookworm, trixie, trixie-backports
//     and sid, in flavour o.Flavour (cloud-amd64 unless set). Kernels whose
//     packages are all in the archive are preferred.
//   - debian:<kernel release>, e.g. debian:7.3.4+deb13-cloud-amd64 or
//     debian:6.1.0-37-cloud-amd64: one exact kernel ABI, as in the package
//     name linux-image-<kernel release> and in `uname -r` in the guest. A
//     release without a flavour (debian:7.3.4+deb13) gets o.Flavour.
//   - debian:<kernel release>=<package version>, e.g.
//     debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1: pinned to one
//     package version.
//
// The packages are downloaded with `apt-get download`, unpacked with
// `dpkg-deb -x` and installed at <cache>/kernels/debian/<package>_<version>/:
//
//	vmlinuz      the bzImage
//	config       the kernel's .config (when the packages ship one)
//	modules/     kernel/**.ko*, modules.builtin, modules.order (when shipped)
//	kernel.json  the Kernel
//
// The directory is built next to its final place and renamed into it at
// the end, so a failed fetch leaves nothing behind. The alias index
// <cache>/kernels/debian/aliases.json maps references to directories, so
// a reference fetched once is answered from the cache with no network, no
// mirror and no apt call at all, unless o.Refresh is set. Package lists
// are refreshed when older than 24 hours.
func FetchDebian(ctx context.Context, ref string, o DebianOptions) (*results.Kernel, error) {
	r, err := parseDebianRef(ref, o.Flavour)
	if err != nil {
		return nil, err
	}
	kdir := filepath.Join(o.cacheDir(), "kernels", "debian")
	c := keyed.Cache[*results.Kernel]{Dir: kdir, What: "debian kernel cache", Aliased: true, Load: kerneldir.Load, Logf: o.logf}
	k, hit, err := c.Get(ctx, r.key(), o.Refresh, func(ctx context.Context) (keyed.Plan, error) {
		return planDebian(ctx, r, kdir, &o)
	})
	if err != nil {
		return nil, err
	}
	if hit {
		o.logf("%s: cached at %s", r, filepath.Dir(k.Image))
	} else {
		o.logf("cached at %s", filepath.Dir(k.Image))
	}
	k.Name = ref
	return k, nil
}

// planDebian resolves r in the archive and says how to install it.
func planDebian(ctx context.Context, r debianRef, kdir string, o *DebianOptions) (keyed.Plan, error) {
	env, err := o.aptEnv(ctx, "apt", debianSuites(), false)
	if err != nil {
		return keyed.Plan{}, err
	}
	o.logf("resolving %s in %s...", r, strings.Join(debianSuites(), " "))
	pick, err := resolveDebian(ctx, env, r)
	if err != nil {
		return keyed.Plan{}, err
	}
	if pick.skipped != "" {
		o.logf("note: skipping %s: packages it depends on are missing from the archive", pick.skipped)
	}
	o.logf("%s is %s %s (%s)", r, pick.image.Name, pick.image.Version, pick.suite)
	if len(pick.missing) > 0 {
		o.logf("note: the archive lacks %s, which %s depends on; installing what there is",
			strings.Join(pick.missing, ", "), pick.image.Name)
	}
	final := filepath.Join(kdir, pick.dirName())
	plan := keyed.Plan{Name: pick.dirName(), Build: func(ctx context.Context, tmp, out string) error {
		return installDebian(ctx, env, tmp, out, final, pick, o)
	}}
	// The exact release resolves offline too: to the newest package when
	// a series was resolved, to the first one fetched for a pinned version.
	switch {
	case r.Series != "":
		plan.Aliases = []keyed.Alias{{Key: pick.release}}
	case r.PkgVersion != "":
		plan.Aliases = []keyed.Alias{{Key: pick.release, Keep: true}}
	}
	return plan, nil
}

// aptEnv returns the private apt environment <cache>/<sub> for the mirror
// o names, its lists of suites (of source packages when source is set)
// updated when stale.
func (o *DebianOptions) aptEnv(ctx context.Context, sub string, suites []string, source bool) (*apt.Env, error) {
	mirror, err := o.mirror()
	if err != nil {
		return nil, err
	}
	env, err := apt.New(filepath.Join(o.cacheDir(), sub), apt.Options{
		Mirror: mirror, Keyring: apt.Keyring(mirror), Suites: suites, Source: source, Log: o.logf, StageRoot: o.aptStage,
	})
	if err != nil {
		return nil, err
	}
	if err := env.Update(ctx, o.Refresh); err != nil {
		return nil, err
	}
	return env, nil
}

// CachedKernels lists the Debian kernels installed in cacheDir (empty means
// paths.CacheDir()), oldest kernel release first. Each Name is the exact
// reference, "debian:<kernel release>".
func CachedKernels(cacheDir string) ([]*results.Kernel, error) {
	if cacheDir == "" {
		cacheDir = paths.CacheDir()
	}
	kdir := filepath.Join(cacheDir, "kernels", "debian")
	des, err := os.ReadDir(kdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing cached kernels: %w", err)
	}
	var ks []*results.Kernel
	for _, de := range des {
		if !de.IsDir() || strings.HasPrefix(de.Name(), ".") {
			continue
		}
		k, err := kerneldir.Load(filepath.Join(kdir, de.Name()))
		if err != nil {
			continue // not a complete kernel directory
		}
		ks = append(ks, k)
	}
	sort.SliceStable(ks, func(i, j int) bool {
		if c := compareDebianVersions(ks[i].Version, ks[j].Version); c != 0 {
			return c < 0
		}
		if ks[i].Package != ks[j].Package {
			return ks[i].Package < ks[j].Package
		}
		return compareDebianVersions(ks[i].PackageVersion, ks[j].PackageVersion) < 0
	})
	return ks, nil
}

// debPkg is one binary package version.
type debPkg struct {
	Name, Version string
	Size          int64
	depends       string
}

// debianPick is a resolved kernel: the image package and every package
// to download.
type debianPick struct {
	image   debPkg
	suite   string
	release string
	pkgs    []debPkg
	// missing lists packages the image depends on that the archive
	// lacks; skipped names a newer but incomplete kernel passed over.
	missing []string
	skipped string
}

func (p *debianPick) dirName() string {
	return p.image.Name + "_" + strings.ReplaceAll(p.image.Version, ":", "%3a")
}

// imageCandidate is a linux-image package name that may match a reference.
type imageCandidate struct {
	name     string
	kver     string // e.g. 7.3.4+deb13 or 6.1.0-50
	release  string // kver-flavour
	unsigned bool
}

// matchImageName parses a linux-image package name for flavour; ok is false
// for other flavours, -dbg packages and meta packages.
func matchImageName(name, flavour string) (imageCandidate, bool) {
	rest, ok := strings.CutPrefix(name, "linux-image-")
	if !ok || strings.HasSuffix(rest, "-dbg") {
		return imageCandidate{}, false
	}
	c := imageCandidate{name: name}
	rest, c.unsigned = strings.CutSuffix(rest, "-unsigned")
	kver, ok := strings.CutSuffix(rest, "-"+flavour)
	if !ok || !kverOnlyRe.MatchString(kver) {
		return imageCandidate{}, false
	}
	c.kver, c.release = kver, rest
	return c, true
}

// inSeries reports whether kernel version kver belongs to series ("6.1"
// holds 6.1.0-50 but not 6.12.117+deb13).
func inSeries(kver, series string) bool {
	rest, ok := strings.CutPrefix(kver, series)
	return ok && (rest == "" || strings.ContainsRune(".-+", rune(rest[0])))
}

// seriesOf returns the major.minor of a kernel version.
func seriesOf(kver string) string {
	parts := strings.SplitN(kver, ".", 3)
	if len(parts) < 2 {
		return kver
	}
	minor := parts[1]
	if i := strings.IndexAny(minor, "-+"); i >= 0 {
		minor = minor[:i]
	}
	return parts[0] + "." + minor
}

// madisonLine is one "name | version | uri suite/component arch Packages"
// line of apt-cache madison.
type madisonLine struct{ name, version, suite string }

func parseMadison(out []byte) []madisonLine { return parseMadisonIndex(out, "Packages") }

// parseMadisonIndex returns the lines of apt-cache madison whose index is
// index: "Packages" for binary packages, "Sources" for source packages.
func parseMadisonIndex(out []byte, index string) []madisonLine {
	var ls []madisonLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		if len(f) != 3 {
			continue
		}
		src := strings.Fields(f[2])
		if len(src) < 3 || src[len(src)-1] != index {
			continue
		}
		suite := src[1]
		if i := strings.LastIndexByte(suite, '/'); i >= 0 {
			suite = suite[:i]
		}
		ls = append(ls, madisonLine{strings.TrimSpace(f[0]), strings.TrimSpace(f[1]), suite})
	}
	return ls
}

// parseShow parses `apt-cache show` stanzas.
func parseShow(out []byte) []debPkg {
	var pkgs []debPkg
	var cur debPkg
	var field string
	flush := func() {
		if cur.Name != "" {
			pkgs = append(pkgs, cur)
		}
		cur, field = debPkg{}, ""
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if field == "depends" {
				cur.depends += " " + strings.TrimSpace(line)
			}
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		field = strings.ToLower(k)
		switch field {
		case "package":
			cur.Name = v
		case "version":
			cur.Version = v
		case "size":
			cur.Size, _ = strconv.ParseInt(v, 10, 64)
		case "depends", "pre-depends":
			if cur.depends != "" {
				cur.depends += ", "
			}
			cur.depends += v
			field = "depends"
		}
	}
	flush()
	return pkgs
}

// releaseDeps returns the dependencies of p that belong to the same
// kernel release (linux-binary-<release>, linux-modules-<release>, ...),
// with the version they must have.
func releaseDeps(p debPkg, release string) []debPkg {
	var deps []debPkg
	for _, group := range strings.Split(p.depends, ",") {
		for _, alt := range strings.Split(group, "|") {
			alt = strings.TrimSpace(alt)
			name, constraint, _ := strings.Cut(alt, " ")
			name = strings.TrimSuffix(name, ":any")
			if !strings.HasPrefix(name, "linux-") || !strings.HasSuffix(name, "-"+release) {
				continue
			}
			v := p.Version
			if c := strings.Trim(strings.TrimSpace(constraint), "()"); strings.HasPrefix(c, "=") {
				v = strings.TrimSpace(strings.TrimPrefix(c, "="))
			}
			deps = append(deps, debPkg{Name: name, Version: v})
			break
		}
	}
	return deps
}

// resolveDebian finds the image package for r and the packages it needs.
//
// Since 6.19, linux-image-<release> is a meta package that depends on
// linux-binary-, linux-modules- and linux-base-<release>, and the archive
// does not always carry all of them (for some releases only linux-binary
// is there). resolveDebian prefers the newest kernel whose packages are all
// present; when no candidate is complete it takes the newest one and
// reports what is missing in pick.missing.
func resolveDebian(ctx context.Context, env *apt.Env, r debianRef) (*debianPick, error) {
	out, err := env.Run(ctx, 5*time.Minute, "apt-cache", "pkgnames", "linux-")
	if err != nil {
		return nil, fmt.Errorf("listing Debian kernels: %w", err)
	}
	exists := map[string]bool{}
	var cands []imageCandidate
	seriesSet := map[string]bool{}
	for _, name := range strings.Fields(string(out)) {
		exists[name] = true
		c, ok := matchImageName(name, r.Flavour)
		if !ok {
			continue
		}
		seriesSet[seriesOf(c.kver)] = true
		if (r.Series != "" && inSeries(c.kver, r.Series)) || (r.Series == "" && c.release == r.Release) {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		var avail []string
		for s := range seriesSet {
			avail = append(avail, s)
		}
		sort.Slice(avail, func(i, j int) bool { return compareDebianVersions(avail[i], avail[j]) < 0 })
		return nil, fmt.Errorf("no Debian kernel package for %s in %s; series with %s kernels there: %s",
			r, strings.Join(debianSuites(), " "), r.Flavour, strings.Join(avail, " "))
	}
	byName := map[string]imageCandidate{}
	args := []string{"madison"}
	for _, c := range cands {
		byName[c.name] = c
		args = append(args, c.name)
	}
	out, err = env.Run(ctx, 5*time.Minute, "apt-cache", args...)
	if err != nil {
		return nil, fmt.Errorf("listing Debian kernel versions: %w", err)
	}
	suiteRank := map[string]int{}
	for i, s := range debianSuites() {
		suiteRank[s] = i + 1
	}
	better := func(x, y madisonLine) bool { // is x better than y?
		cx, cy := byName[x.name], byName[y.name]
		if c := compareDebianVersions(cx.kver, cy.kver); c != 0 {
			return c > 0
		}
		if c := compareDebianVersions(x.version, y.version); c != 0 {
			return c > 0
		}
		if cx.unsigned != cy.unsigned {
			return !cx.unsigned // the signed package holds the same files
		}
		return suiteRank[x.suite] < suiteRank[y.suite]
	}
	var lines []madisonLine
	for _, l := range parseMadison(out) {
		if _, ok := byName[l.name]; !ok || suiteRank[l.suite] == 0 {
			continue
		}
		if r.PkgVersion != "" && l.version != r.PkgVersion {
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("no version of the Debian kernel %s in %s", r, strings.Join(debianSuites(), " "))
	}
	sort.SliceStable(lines, func(i, j int) bool { return better(lines[i], lines[j]) })

	// Read all candidates' details at once and take the best complete one.
	shown, err := aptShow(ctx, env, lines)
	if err != nil {
		return nil, err
	}
	var best *madisonLine
	var bestMissing []string
	for i := range lines {
		l := &lines[i]
		p, ok := shown[l.name+"="+l.version]
		if !ok {
			continue
		}
		var missing []string
		for _, d := range releaseDeps(p, byName[l.name].release) {
			if !exists[d.Name] {
				missing = append(missing, d.Name)
			}
		}
		if best == nil {
			best, bestMissing = l, missing
		}
		if len(missing) == 0 {
			best, bestMissing = l, nil
			break
		}
	}
	if best == nil {
		return nil, fmt.Errorf("apt-cache show printed none of the candidates for %s", r)
	}
	pick := &debianPick{suite: best.suite, release: byName[best.name].release, missing: bestMissing}
	if best != &lines[0] {
		pick.skipped = lines[0].name + " " + lines[0].version
	}

	// Collect the image package and, transitively, the packages of the
	// same release it depends on that the archive has.
	seen := map[string]bool{best.name: true}
	level := []madisonLine{*best}
	for len(level) > 0 {
		got, err := aptShow(ctx, env, level)
		if err != nil {
			return nil, err
		}
		var next []madisonLine
		for _, l := range level {
			p, ok := got[l.name+"="+l.version]
			if !ok {
				return nil, fmt.Errorf("apt-cache show %s=%s printed no package", l.name, l.version)
			}
			if l.name == best.name {
				pick.image = p
			}
			pick.pkgs = append(pick.pkgs, p)
			for _, d := range releaseDeps(p, pick.release) {
				if !seen[d.Name] && exists[d.Name] {
					seen[d.Name] = true
					next = append(next, madisonLine{name: d.Name, version: d.Version})
				}
			}
		}
		level = next
	}
	return pick, nil
}

// aptShow runs apt-cache show for the given name=version pairs and
// returns the packages it printed, keyed by name=version.
func aptShow(ctx context.Context, env *apt.Env, ls []madisonLine) (map[string]debPkg, error) {
	args := []string{"show"}
	seen := map[string]bool{}
	for _, l := range ls {
		k := l.name + "=" + l.version
		if !seen[k] {
			seen[k] = true
			args = append(args, k)
		}
	}
	out, err := env.Run(ctx, 5*time.Minute, "apt-cache", args...)
	if err != nil {
		return nil, fmt.Errorf("reading Debian package details: %w", err)
	}
	m := map[string]debPkg{}
	for _, p := range parseShow(out) {
		m[p.Name+"="+p.Version] = p
	}
	return m, nil
}

// installDebian downloads and unpacks pick into out, the entry that
// becomes final; tmp is scratch space.
func installDebian(ctx context.Context, env *apt.Env, tmp, out, final string, pick *debianPick, o *DebianOptions) error {
	debs, root := filepath.Join(tmp, "debs"), filepath.Join(tmp, "root")
	for _, d := range []string{debs, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("debian kernel cache: %w", err)
		}
	}
	start := time.Now()
	var files []string
	for _, p := range pick.pkgs {
		o.logf("downloading %s %s (%s)...", p.Name, p.Version, humanSize(p.Size))
		if err := env.Download(ctx, 30*time.Minute, debs, "-q", "download", p.Name+"="+p.Version); err != nil {
			return fmt.Errorf("downloading %s: %w", p.Name, err)
		}
		m, _ := filepath.Glob(filepath.Join(debs, globEscape(p.Name)+"_*.deb"))
		if len(m) != 1 {
			return fmt.Errorf("downloading %s: apt-get download left %d matching .deb files in %s", p.Name, len(m), debs)
		}
		files = append(files, m[0])
	}
	o.logf("downloaded in %.1fs; unpacking...", time.Since(start).Seconds())
	for _, f := range files {
		if _, err := proc.Run(ctx, proc.Opts{Timeout: 10 * time.Minute}, "dpkg-deb", "-x", f, root); err != nil {
			return fmt.Errorf("unpacking %s: %w", filepath.Base(f), err)
		}
	}
	if err := layoutKernel(root, out, pick.release); err != nil {
		return fmt.Errorf("%s %s: %w", pick.image.Name, pick.image.Version, err)
	}
	image := filepath.Join(out, "vmlinuz")
	kver, err := kerneldir.CheckBzImage(image)
	if err != nil {
		return err
	}
	if kver == "" {
		kver = pick.release
	} else if kver != pick.release {
		o.logf("note: %s reports kernel release %s, not %s", pick.image.Name, kver, pick.release)
	}
	id, err := kerneldir.ID(image, filepath.Join(out, "config"))
	if err != nil {
		return err
	}
	k := &results.Kernel{
		Name:           "debian:" + pick.release,
		ID:             id,
		Version:        kver,
		Source:         "debian",
		Package:        pick.image.Name,
		PackageVersion: pick.image.Version,
		Suite:          pick.suite,
		Image:          filepath.Join(final, "vmlinuz"),
	}
	if _, err := os.Stat(filepath.Join(out, "config")); err == nil {
		k.Config = filepath.Join(final, "config")
	}
	if _, err := os.Stat(filepath.Join(out, "modules")); err == nil {
		k.Modules = filepath.Join(final, "modules")
	}
	var lacks []string
	if k.Config == "" {
		lacks = append(lacks, "no kernel config")
	}
	if k.Modules == "" {
		lacks = append(lacks, "no modules")
	}
	if len(lacks) > 0 {
		o.logf("warning: %s %s has %s", pick.image.Name, pick.image.Version, strings.Join(lacks, " and "))
	}
	if err := kerneldir.Write(out, k); err != nil {
		return err
	}
	o.logf("unpacked %s %s in %.1fs", pick.image.Name, pick.image.Version, time.Since(start).Seconds())
	return nil
}

// layoutKernel moves the files of an unpacked kernel package tree (root)
// into out: vmlinuz, config and modules/. Both the old layout
// (boot/vmlinuz-<release>, lib/modules/<release>) and the 7.x one
// (usr/lib/modules/<release>/{vmlinuz,config}) are understood.
func layoutKernel(root, out, release string) error {
	var modDirs []string
	for _, d := range []string{"usr/lib/modules", "lib/modules"} {
		p := filepath.Join(root, d, release)
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			modDirs = append(modDirs, p)
		}
	}
	if len(modDirs) == 0 {
		// The release in the package name should match the directory;
		// accept a single other directory.
		for _, d := range []string{"usr/lib/modules", "lib/modules"} {
			m, _ := filepath.Glob(filepath.Join(root, d, "*"))
			modDirs = append(modDirs, m...)
		}
		if len(modDirs) > 1 {
			return fmt.Errorf("several module directories and none named %s: %s", release, strings.Join(modDirs, " "))
		}
	}
	mods := ""
	if len(modDirs) > 0 {
		mods = modDirs[0]
		for _, other := range modDirs[1:] {
			if err := mergeDir(other, mods); err != nil {
				return err
			}
		}
	}
	find := func(names ...string) string {
		for _, n := range names {
			if n == "" {
				continue
			}
			if fi, err := os.Lstat(n); err == nil && fi.Mode().IsRegular() {
				return n
			}
		}
		return ""
	}
	modFile := func(n string) string {
		if mods == "" {
			return ""
		}
		return filepath.Join(mods, n)
	}
	vmlinuz := find(filepath.Join(root, "boot", "vmlinuz-"+release), modFile("vmlinuz"))
	if vmlinuz == "" {
		return fmt.Errorf("no kernel image: neither boot/vmlinuz-%s nor usr/lib/modules/%s/vmlinuz in the packages", release, release)
	}
	if err := os.Rename(vmlinuz, filepath.Join(out, "vmlinuz")); err != nil {
		return err
	}
	if config := find(filepath.Join(root, "boot", "config-"+release), modFile("config")); config != "" {
		if err := os.Rename(config, filepath.Join(out, "config")); err != nil {
			return err
		}
	}
	if mods != "" {
		if des, err := os.ReadDir(mods); err != nil || len(des) == 0 {
			return err // nothing but vmlinuz: no modules directory
		}
		if err := os.Rename(mods, filepath.Join(out, "modules")); err != nil {
			return err
		}
	}
	return nil
}

// mergeDir moves the entries of src into dst, keeping dst's on conflict
// and merging subdirectories.
func mergeDir(src, dst string) error {
	des, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, de := range des {
		s, d := filepath.Join(src, de.Name()), filepath.Join(dst, de.Name())
		fi, err := os.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Rename(s, d); err != nil {
				return err
			}
		case err != nil:
			return err
		case fi.IsDir() && de.IsDir():
			if err := mergeDir(s, d); err != nil {
				return err
			}
		}
	}
	return nil
}

func humanSize(n int64) string {
	if n <= 0 {
		return "size unknown"
	}
	return units.Bytes(n)
}

// globEscape escapes the glob metacharacters of a package name.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// compareDebianVersions compares two Debian package versions
// ([epoch:]upstream[-revision]) as dpkg --compare-versions does and returns
// -1, 0 or +1. '~' sorts before everything, even the end of the string, so
// 7.3.4-1~bpo13+1 < 7.3.4-1.
func compareDebianVersions(a, b string) int {
	ea, ua, ra := splitDebianVersion(a)
	eb, ub, rb := splitDebianVersion(b)
	if ea != eb {
		if ea < eb {
			return -1
		}
		return 1
	}
	if c := verrevcmp(ua, ub); c != 0 {
		return c
	}
	return verrevcmp(ra, rb)
}

func splitDebianVersion(v string) (epoch int, upstream, revision string) {
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, ':'); i >= 0 {
		if e, err := strconv.Atoi(v[:i]); err == nil {
			epoch = e
		}
		v = v[i+1:]
	}
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		return epoch, v[:i], v[i+1:]
	}
	return epoch, v, ""
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// debOrder is dpkg's character weight for the non-digit parts; 0 stands
// for the end of the string.
func debOrder(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	c := s[i]
	switch {
	case isDigit(c):
		return 0
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return int(c)
	case c == '~':
		return -1
	default:
		return int(c) + 256
	}
}

// verrevcmp is dpkg's comparison of an upstream version or revision.
func verrevcmp(a, b string) int {
	i, j := 0, 0
	sign := func(n int) int {
		switch {
		case n < 0:
			return -1
		case n > 0:
			return 1
		}
		return 0
	}
	for i < len(a) || j < len(b) {
		for (i < len(a) && !isDigit(a[i])) || (j < len(b) && !isDigit(b[j])) {
			ac, bc := debOrder(a, i), debOrder(b, j)
			if ac != bc {
				return sign(ac - bc)
			}
			i++
			j++
		}
		for i < len(a) && a[i] == '0' {
			i++
		}
		for j < len(b) && b[j] == '0' {
			j++
		}
		firstDiff := 0
		for i < len(a) && j < len(b) && isDigit(a[i]) && isDigit(b[j]) {
			if firstDiff == 0 {
				firstDiff = int(a[i]) - int(b[j])
			}
			i++
			j++
		}
		if i < len(a) && isDigit(a[i]) {
			return 1
		}
		if j < len(b) && isDigit(b[j]) {
			return -1
		}
		if firstDiff != 0 {
			return sign(firstDiff)
		}
	}
	return 0
}
