package debian

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"klab/images/apt"
)

// debPkg is one binary package version.
type debPkg struct {
	Name, Version string
	Size          int64
	depends       string
}

// debianPick is a resolved kernel: the image package and every package
// to download.
type debianPick struct {
	image debPkg
	// ref is the reference resolved.
	ref     debianRef
	suite   string
	release string
	pkgs    []debPkg
	// missing lists packages the image depends on that the archive
	// lacks; skipped names a newer but incomplete kernel passed over.
	missing []string
	skipped string
}

// DirName is the name of the cache entry of a package version:
// <package>_<version>, the epoch's colon escaped as apt escapes it in file
// names.
func DirName(pkg, version string) string {
	return pkg + "_" + strings.ReplaceAll(version, ":", "%3a")
}

func (p *debianPick) dirName() string {
	return DirName(p.image.Name, p.image.Version)
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
			r, strings.Join(Suites(), " "), r.Flavour, strings.Join(avail, " "))
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
	for i, s := range Suites() {
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
	var lines, others []madisonLine
	for _, l := range parseMadison(out) {
		if _, ok := byName[l.name]; !ok || suiteRank[l.suite] == 0 {
			continue
		}
		if r.PkgVersion != "" && l.version != r.PkgVersion {
			others = append(others, l)
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		if len(others) > 0 {
			return nil, fmt.Errorf("no version of the Debian kernel %s in %s; versions there: %s",
				r, strings.Join(Suites(), " "), versionsIn(others))
		}
		return nil, fmt.Errorf("no version of the Debian kernel %s in %s", r, strings.Join(Suites(), " "))
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
	pick := &debianPick{ref: r, suite: best.suite, release: byName[best.name].release, missing: bestMissing}
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

// versionsIn lists the versions of ls, oldest first, each once with its
// suites: "7.3.4-1~bpo13+2 (trixie-backports), 7.3.5-1 (sid)".
func versionsIn(ls []madisonLine) string {
	suites := map[string][]string{}
	var versions []string
	for _, l := range ls {
		if suites[l.version] == nil {
			versions = append(versions, l.version)
		}
		if !slices.Contains(suites[l.version], l.suite) {
			suites[l.version] = append(suites[l.version], l.suite)
		}
	}
	sort.SliceStable(versions, func(i, j int) bool { return compareDebianVersions(versions[i], versions[j]) < 0 })
	var parts []string
	for _, v := range versions {
		parts = append(parts, v+" ("+strings.Join(suites[v], " ")+")")
	}
	return strings.Join(parts, ", ")
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

// SourcePackage is one version of a Debian source package in a suite.
type SourcePackage struct {
	// Name and Version name it, e.g. fuse3 3.18.3-1.
	Name, Version string
	// Suite is the suite it was found in.
	Suite string
}

// FindSourcePackage looks pkg up among the source packages of the suites
// in, through the private apt environment <cache>/apt-src, and returns its
// newest version there (the pinned one, when pin is set) with that
// environment, from which the caller downloads it.
func (o *Options) FindSourcePackage(ctx context.Context, pkg, pin string, in []string) (SourcePackage, *apt.Env, error) {
	env, err := o.aptEnv(ctx, "apt-src", in, true)
	if err != nil {
		return SourcePackage{}, nil, err
	}
	out, err := env.Run(ctx, 5*time.Minute, "apt-cache", "madison", pkg)
	if err != nil {
		return SourcePackage{}, nil, fmt.Errorf("looking up source package %s: %w", pkg, err)
	}
	best, err := pickSourcePackage(parseMadisonSources(out), pkg, pin, in)
	if err != nil {
		return SourcePackage{}, nil, err
	}
	return SourcePackage{Name: best.name, Version: best.version, Suite: best.suite}, env, nil
}

// parseMadisonSources returns the source package lines of apt-cache
// madison ("name | version | uri suite/component Sources").
func parseMadisonSources(out []byte) []madisonLine { return parseMadisonIndex(out, "Sources") }

// pickSourcePackage chooses the newest version of pkg in suites (the one
// pinned, when pin is set).
func pickSourcePackage(lines []madisonLine, pkg, pin string, suites []string) (madisonLine, error) {
	best, versions, ok := newestIn(lines, pkg, pin, suites)
	if ok {
		return best, nil
	}
	if pin != "" && len(versions) > 0 {
		return madisonLine{}, fmt.Errorf("no source package %s version %s in %s; there are: %s",
			pkg, pin, strings.Join(suites, " "), strings.Join(versions, " "))
	}
	return madisonLine{}, fmt.Errorf("no source package %s in %s", pkg, strings.Join(suites, " "))
}
