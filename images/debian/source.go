package debian

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"klab/images/apt"
	"klab/images/keyed"
	"klab/internal/filehash"
	"klab/internal/proc"
)

// Debian kernel sources: Debian's linux-source-<series> packages, fetched
// through the same private apt configuration as the kernel images (see
// Fetch), for building kernels from source.

// Series are the upstream series klab's Debian suites carry, as help
// texts and errors list them: the linux-source-<series> packages known to
// exist there (others are tried but may be missing).
func Series() []string { return []string{"6.1", "6.12", "7.2", "7.3"} }

// Source is Debian's linux-source-<series> package, unpacked into
// the cache.
type Source struct {
	// Package is the binary package, e.g. "linux-source-7.3".
	Package string `json:"package"`
	// Version is the package version, e.g. "7.3.4-1~bpo13+1".
	Version string `json:"version"`
	// Suite is the suite the package came from.
	Suite string `json:"suite,omitempty"`
	// Tarball is the path of the source tarball the package ships
	// (usr/src/linux-source-<series>.tar.xz).
	Tarball string `json:"tarball"`
	// SHA256 is the hex SHA-256 of the tarball.
	SHA256 string `json:"sha256"`
}

// CheckSourceRef returns the error FetchSource gives for a reference it
// cannot parse, without a download.
func CheckSourceRef(ref string) error {
	_, _, err := parseSourceRef(ref)
	return err
}

// parseSourceRef parses "debian:<series>" or
// "debian:<series>=<package version>" ("debian:" may be left out).
func parseSourceRef(ref string) (series, pin string, err error) {
	s := strings.TrimPrefix(ref, "debian:")
	s = strings.TrimPrefix(s, "linux-source-")
	series, pin, pinned := strings.Cut(s, "=")
	if !seriesRe.MatchString(series) || (pinned && pin == "") {
		return "", "", fmt.Errorf("bad Debian kernel source %q: want debian:<series> (%s), optionally pinned as debian:7.3=<package version>",
			ref, strings.Join(Series(), ", "))
	}
	return series, pin, nil
}

// FetchSource returns Debian's linux-source-<series> for ref
// ("debian:7.3", or "debian:7.3=7.3.4-1~bpo13+1" to pin a package
// version), downloading it when it is not cached. The newest version in
// bookworm, trixie, trixie-backports and sid wins. Only the tarball is
// kept, at <cache>/sources/debian/<package>_<version>/; like Fetch,
// a reference fetched once is answered from the cache with no network and
// no apt call unless o.Refresh is set.
func FetchSource(ctx context.Context, ref string, o Options) (*Source, error) {
	series, pin, err := parseSourceRef(ref)
	if err != nil {
		return nil, err
	}
	pkg := "linux-source-" + series
	key := series
	if pin != "" {
		key += "=" + pin
	}
	c := debianSourceCache(filepath.Join(o.CacheRoot(), "sources", "debian"), o.Logf)
	s, _, err := c.Get(ctx, key, o.Refresh, func(ctx context.Context) (keyed.Plan, error) {
		env, err := o.AptEnv(ctx)
		if err != nil {
			return keyed.Plan{}, err
		}
		out, err := env.Run(ctx, 5*time.Minute, "apt-cache", "madison", pkg)
		if err != nil {
			return keyed.Plan{}, fmt.Errorf("looking up %s: %w", pkg, err)
		}
		best, err := pickSource(parseMadison(out), pkg, pin)
		if err != nil {
			return keyed.Plan{}, err
		}
		return keyed.Plan{
			Name: DirName(pkg, best.version),
			Build: func(ctx context.Context, tmp, out string) error {
				return installSource(ctx, env, tmp, out, best, &o)
			},
		}, nil
	})
	return s, err
}

// debianSourceCache is the keyed cache of Debian kernel sources in sdir.
func debianSourceCache(sdir string, logf func(string, ...any)) keyed.Cache[*Source] {
	return keyed.Cache[*Source]{Dir: sdir, What: "debian source cache", Aliased: true, Load: loadSourceDir, Logf: logf}
}

// pickSource chooses the newest version of pkg among madison lines from
// klab's suites (the one pinned, when pin is set).
func pickSource(lines []madisonLine, pkg, pin string) (madisonLine, error) {
	best, versions, ok := newestIn(lines, pkg, pin, Suites())
	if ok {
		return best, nil
	}
	if pin != "" && len(versions) > 0 {
		return madisonLine{}, fmt.Errorf("no %s version %s in %s; there are: %s", pkg, pin,
			strings.Join(Suites(), " "), strings.Join(versions, " "))
	}
	return madisonLine{}, fmt.Errorf("no %s package in %s; Debian ships kernel sources for %s",
		pkg, strings.Join(Suites(), " "), strings.Join(Series(), ", "))
}

// newestIn returns the newest version of pkg among madison lines from
// suites (the pinned one, when pin is set), an earlier suite winning a
// tie, and every version of pkg seen there.
func newestIn(lines []madisonLine, pkg, pin string, suites []string) (best madisonLine, versions []string, ok bool) {
	rank := map[string]int{}
	for i, s := range suites {
		rank[s] = i + 1
	}
	var cands []madisonLine
	for _, l := range lines {
		if l.name != pkg || rank[l.suite] == 0 {
			continue
		}
		versions = append(versions, l.version)
		if pin == "" || l.version == pin {
			cands = append(cands, l)
		}
	}
	if len(cands) == 0 {
		return madisonLine{}, versions, false
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if c := compareDebianVersions(cands[i].version, cands[j].version); c != 0 {
			return c > 0
		}
		return rank[cands[i].suite] < rank[cands[j].suite]
	})
	return cands[0], versions, true
}

// loadSourceDir reads dir/source.json and points Tarball into dir.
func loadSourceDir(dir string) (*Source, error) {
	data, err := os.ReadFile(filepath.Join(dir, "source.json"))
	if err != nil {
		return nil, err
	}
	var s Source
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "source.json"), err)
	}
	if s.Tarball == "" || strings.ContainsAny(s.Tarball, `/\`) {
		return nil, fmt.Errorf("%s: bad tarball name %q", filepath.Join(dir, "source.json"), s.Tarball)
	}
	s.Tarball = filepath.Join(dir, s.Tarball)
	if _, err := os.Stat(s.Tarball); err != nil {
		return nil, err
	}
	return &s, nil
}

// installSource downloads l and keeps the tarball it ships in out,
// the new entry; tmp is scratch space.
func installSource(ctx context.Context, env *apt.Env, tmp, out string, l madisonLine, o *Options) error {
	debs, root := filepath.Join(tmp, "debs"), filepath.Join(tmp, "root")
	for _, d := range []string{debs, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("debian source cache: %w", err)
		}
	}
	start := time.Now()
	o.Logf("downloading %s %s (%s)...", l.name, l.version, l.suite)
	if err := env.Download(ctx, 30*time.Minute, debs, "-q", "download", l.name+"="+l.version); err != nil {
		return fmt.Errorf("downloading %s: %w", l.name, err)
	}
	m, _ := filepath.Glob(filepath.Join(debs, GlobEscape(l.name)+"_*.deb"))
	if len(m) != 1 {
		return fmt.Errorf("downloading %s: apt-get download left %d matching .deb files in %s", l.name, len(m), debs)
	}
	if _, err := proc.Run(ctx, proc.Opts{Timeout: 10 * time.Minute}, "dpkg-deb", "-x", m[0], root); err != nil {
		return fmt.Errorf("unpacking %s: %w", filepath.Base(m[0]), err)
	}
	tars, _ := filepath.Glob(filepath.Join(root, "usr", "src", GlobEscape(l.name)+".tar.*"))
	if len(tars) != 1 {
		return fmt.Errorf("%s %s: want one usr/src/%s.tar.* in the package, found %d", l.name, l.version, l.name, len(tars))
	}
	name := filepath.Base(tars[0])
	if err := os.Rename(tars[0], filepath.Join(out, name)); err != nil {
		return fmt.Errorf("debian source cache: %w", err)
	}
	sum, err := filehash.SHA256(filepath.Join(out, name))
	if err != nil {
		return err
	}
	s := &Source{Package: l.name, Version: l.version, Suite: l.suite, Tarball: name, SHA256: sum}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("source.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "source.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("source.json: %w", err)
	}
	o.Logf("fetched %s %s in %.1fs", l.name, l.version, time.Since(start).Seconds())
	return nil
}
