package userspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"klab/images/apt"
	"klab/internal/proc"
)

// resolve asks apt which packages installing s.Packages from s.Suite
// takes on a system with nothing installed: the dependency closure over
// Depends and Pre-Depends (no Recommends), with apt's own choice among
// alternatives and virtual packages. It is a simulation (apt-get -s)
// against the private environment's empty status file: nothing is
// installed, and nothing is written outside the private environment.
func resolve(ctx context.Context, env *apt.Env, s Spec) ([]Package, error) {
	args := []string{"-q", "-s", "-t", s.Suite, "--no-install-recommends",
		"-o", "APT::Install-Suggests=false", "install"}
	args = append(args, s.Packages...)
	out, err := env.Run(ctx, 10*time.Minute, "apt-get", args...)
	if err != nil {
		var pe *proc.Error
		if errors.As(err, &pe) {
			if msg := aptErrors(pe.Output); msg != "" {
				return nil, fmt.Errorf("resolving the userspace packages in %s: %s", s.Suite, msg)
			}
		}
		return nil, fmt.Errorf("resolving the userspace packages in %s: %w", s.Suite, err)
	}
	return parseSimulation(out)
}

// instRe matches apt-get -s's "Inst NAME [OLD] (VERSION RELEASES [ARCH])".
var instRe = regexp.MustCompile(`^Inst (\S+) (?:\[\S+\] )?\((\S+) .*\[([a-z0-9]+)\]\)`)

// parseSimulation returns the packages an `apt-get -s install` would
// unpack, sorted by name.
func parseSimulation(out []byte) ([]Package, error) {
	var pkgs []Package
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "Inst ") {
			continue
		}
		m := instRe.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("resolving the userspace packages: unexpected apt-get line %q", line)
		}
		name, _, _ := strings.Cut(m[1], ":") // name:arch
		if seen[name] {
			continue
		}
		seen[name] = true
		pkgs = append(pkgs, Package{Name: name, Version: m[2], Arch: m[3]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("resolving the userspace packages: apt-get planned to install nothing")
	}
	slices.SortFunc(pkgs, func(a, b Package) int { return strings.Compare(a.Name, b.Name) })
	return pkgs, nil
}

// aptErrors returns apt's own error lines ("E: Unable to locate package
// foo") joined, or "".
func aptErrors(out string) string {
	var msgs []string
	for _, l := range strings.Split(out, "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "E: "); ok {
			msgs = append(msgs, m)
		}
	}
	return strings.Join(msgs, "; ")
}
