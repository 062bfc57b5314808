package experiments

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"klab/guest/proto"
	"klab/internal/fileio"
	"klab/results/profile"
	"klab/results/report"
)

// Bounds on a guest's profile: what the host keeps of it.
const (
	maxProfileStacks = 20000
	maxStackLen      = 16 << 10
	// MaxProfileFile is the largest folded profile file Saved reads.
	MaxProfileFile = 16 << 20
)

// saveProfile writes a guest's profile as a folded file under
// dir/profiles and returns its path relative to dir, or why there is
// none. The guest is not trusted: stacks are counted only when well
// formed, their text is cleaned and their number bounded.
func saveProfile(dir, name string, p *proto.Profile) (file, problem string) {
	switch {
	case p == nil:
		return "", "the guest sent no profile"
	case p.Error != "":
		return "", guestText(p.Error)
	}
	prof := profile.New()
	for i, st := range p.Stacks {
		if i >= maxProfileStacks {
			break
		}
		if st.Count <= 0 || len(st.Stack) > maxStackLen {
			continue
		}
		prof.Add(cleanStack(st.Stack), st.Count)
	}
	if prof.Total() == 0 {
		return "", "the profile has no samples"
	}
	var b bytes.Buffer
	if err := prof.WriteFolded(&b); err != nil {
		return "", err.Error()
	}
	rel := filepath.Join("profiles", name)
	if err := os.MkdirAll(filepath.Join(dir, "profiles"), 0o755); err != nil {
		return "", err.Error()
	}
	if err := fileio.WriteAtomic(filepath.Join(dir, rel), b.Bytes(), 0o644); err != nil {
		return "", err.Error()
	}
	return rel, ""
}

// cleanStack makes a guest's stack one folded-format field: printable,
// no spaces, frames without empty names.
func cleanStack(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == ';':
			return r
		case unicode.IsSpace(r) || !unicode.IsPrint(r):
			return '_'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	frames := strings.Split(s, ";")
	out := frames[:0]
	for _, f := range frames {
		if f != "" {
			out = append(out, f)
		}
	}
	return strings.Join(out, ";")
}

// loadProfile reads a sample's folded profile from the run directory.
func loadProfile(dir, rel string) (*profile.Profile, error) {
	if rel == "" || filepath.IsAbs(rel) || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("profile %q: not a file inside the run directory", rel)
	}
	f, err := os.Open(filepath.Join(dir, rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return profile.ReadFolded(f, MaxProfileFile)
}

// Bounds on a profile comparison in the report.
const (
	// profileChanged is how many most-changed functions a row lists;
	// profileMinShare the share under which a function is left out of
	// them on both sides.
	profileChanged  = 8
	profileMinShare = 0.01
)

// profiles compares the perf profiles of each row of a profiled
// workload, A's rounds merged against B's. Profiles that cannot be read
// become warnings.
func (s *Saved) profiles(warnings []string) ([]report.Profile, []string) {
	p, spec := s.Plan, s.File.Spec
	var out []report.Profile
	for ri, pr := range p.Rows {
		cell, err := s.File.Cell(p.Point(Unit{Row: ri, Side: SideA}))
		if err != nil {
			continue
		}
		for _, w := range cell.Workloads {
			if w.Profile != ProfilePerf {
				continue
			}
			name := w.Name
			if pr.Label != "-" {
				name += " " + pr.Label
			}
			a, b := profile.New(), profile.New()
			var files, missing []string
			for _, smp := range s.Samples.Samples {
				if smp.Row != ri || smp.Workload != w.Name || smp.Error != "" {
					continue
				}
				if smp.Profile == "" {
					missing = append(missing, fmt.Sprintf("%s round %d: %s", sideName(p, smp.Side), smp.Round, smp.ProfileError))
					continue
				}
				prof, err := loadProfile(s.Dir, smp.Profile)
				if err != nil {
					missing = append(missing, fmt.Sprintf("%s round %d: %v", sideName(p, smp.Side), smp.Round, err))
					continue
				}
				prof = alias(prof)
				files = append(files, smp.Profile)
				if smp.Side == SideA {
					a.Merge(prof)
				} else {
					b.Merge(prof)
				}
			}
			if len(missing) > 0 {
				warnings = append(warnings, fmt.Sprintf("%s: %d profile(s) missing: %s", name, len(missing), missing[0]))
			}
			if a.Total() == 0 && b.Total() == 0 {
				continue
			}
			rp := report.Profile{Row: name, Event: proto.PerfCPUClock, SamplesA: a.Total(), SamplesB: b.Total(), Files: files}
			// Shares are of the busy samples: an idle CPU's loop
			// (rest_init, start_kernel on the boot CPU) is no function
			// a change made slower or faster.
			busyA, idleA := a.SplitIdle()
			busyB, idleB := b.SplitIdle()
			rp.IdleA, rp.IdleB = share(idleA.Total(), a.Total()), share(idleB.Total(), b.Total())
			for _, c := range profile.Lookup(busyA, busyB, spec.ProfileFunctions) {
				rp.Functions = append(rp.Functions, funcShare(c))
			}
			for _, c := range profile.Diff(busyA, busyB, profileChanged, profileMinShare) {
				rp.Changed = append(rp.Changed, funcShare(c))
			}
			rp.IcicleA = icicle(busyA, name+" on "+p.Label(SideA)+", busy samples", spec.ProfileFunctions)
			rp.IcicleB = icicle(busyB, name+" on "+p.Label(SideB)+", busy samples", spec.ProfileFunctions)
			out = append(out, rp)
		}
	}
	return out, warnings
}

// share is n of total as a share (0..1), 0 for no total.
func share(n, total int64) float64 {
	if total == 0 {
		return 0
	}
	return float64(n) / float64(total)
}

func funcShare(c profile.Change) report.FuncShare {
	return report.FuncShare{Func: c.Func, A: c.A.Inclusive, B: c.B.Inclusive, SelfA: c.A.Self, SelfB: c.B.Self}
}

// icicle draws p as SVG, or nothing when it has no samples.
func icicle(p *profile.Profile, title string, highlight []string) string {
	if p.Total() == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := profile.Icicle(&b, p, profile.IcicleOptions{Title: title, Highlight: highlight}); err != nil {
		return ""
	}
	return b.String()
}

// alias folds the names one function has in different kernels into one,
// so that comparing kernels does not list a rename as a change: the
// "_noprof" variants of the allocators (memory allocation profiling)
// count as the function they wrap.
func alias(p *profile.Profile) *profile.Profile {
	out := profile.New()
	for stack, n := range p.Stacks {
		if strings.Contains(stack, "_noprof") {
			frames := strings.Split(stack, ";")
			for i, f := range frames {
				frames[i] = strings.TrimSuffix(f, "_noprof")
			}
			stack = strings.Join(frames, ";")
		}
		out.Add(stack, n)
	}
	return out
}
