package experiments

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"klab/guest/proto"
	"klab/lab"
	"klab/results"
)

// guestSpec has a workload for each kind of record (a CPU profile, a
// perf profile, the served check) and a check for each verdict.
const guestSpec = `
name: guesttest
rounds: 2
compare: transport
params:
  transport: [dev, uring]
setup:
  script: echo setup
server:
  kind: passthrough
  transport: ${transport}
  backing: /tmp/backing
  mountpoint: /mnt/fuse
workloads:
  - name: prof
    pattern: randread
    dir: /mnt/fuse/p
    jobs: 1
    bs: 4k
    size: 1M
    profile: go
  - name: perf
    pattern: randread
    dir: /mnt/fuse/f
    jobs: 1
    bs: 4k
    size: 1M
    profile: perf
  - name: served
    pattern: randread
    dir: /mnt/fuse/s
    jobs: 1
    bs: 4k
    size: 1M
    min_served: 0.9
checks:
  - name: exit
    run: "exit 3"
  - name: slow
    run: "sleep 1"
    max_s: 0.5
  - name: hang
    run: "sleep 100"
  - name: expect
    run: "false"
    expect_exit: 1
`

// guestResults answers guestSpec's steps as the guest would.
func guestResults(_ *fakeGuest, st proto.Step, d *proto.Done) error {
	if w, transport := innerWorkload(st); w != nil {
		switch w.Name {
		case "prof":
			d.Metrics.CPUProfile = []byte("pprof data")
		case "perf":
			if transport == "dev" {
				d.Profile = &proto.Profile{Stacks: []proto.ProfileStack{{Stack: "main;read", Count: 3}}}
			}
		case "served":
			d.Metrics.Bytes = 1000
			d.FUSE = &proto.FUSEStats{ServerReadBytes: 100}
		}
		return nil
	}
	if st.Kind != proto.StepExec || len(st.Argv) != 3 {
		return nil
	}
	switch st.Argv[2] {
	case "exit 3":
		d.ExitCode, d.Error = 3, "boom"
	case "sleep 1":
		d.DurationNs = 2e9
	case "sleep 100":
		d.ExitCode, d.TimedOut = -1, true
	case "false":
		d.ExitCode = 1
	}
	return nil
}

// TestRunRecords: what a guest measured becomes samples, check results
// and profiles under the run directory.
func TestRunRecords(t *testing.T) {
	f := loadRunSpec(t, guestSpec)
	fake := &fakeOpener{t: t, step: guestResults}
	o := runOptions(t, fake)
	var progress strings.Builder
	o.Progress = &progress
	res, err := Run(context.Background(), f, o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	s := readSamples(t, res.Dir)
	if len(s.Samples) != 3*2*2 {
		t.Fatalf("%d samples, want 3 workloads x 2 sides x 2 rounds", len(s.Samples))
	}
	for _, smp := range s.Samples {
		name := smp.Workload + "-" + smp.Side + "-round" + string(rune('0'+smp.Round))
		switch smp.Workload {
		case "prof":
			data, err := os.ReadFile(filepath.Join(res.Dir, "profiles", name+".pprof"))
			if err != nil || string(data) != "pprof data" {
				t.Errorf("%s: CPU profile %q, %v", name, data, err)
			}
			if smp.Error != "" || smp.Metrics == nil || smp.Metrics.CPUProfile != nil {
				t.Errorf("%s: error %q, metrics %+v: want a value, the profile only in its file", name, smp.Error, smp.Metrics)
			}
		case "perf":
			want := Sample{Profile: filepath.Join("profiles", name+".folded")}
			if smp.Side == SideB {
				want = Sample{ProfileError: "the guest sent no profile"}
			}
			if smp.Profile != want.Profile || smp.ProfileError != want.ProfileError || smp.Error != "" {
				t.Errorf("%s: profile %q, problem %q, error %q; want %q, %q", name, smp.Profile, smp.ProfileError, smp.Error, want.Profile, want.ProfileError)
			}
			if smp.Profile != "" {
				if data, err := os.ReadFile(filepath.Join(res.Dir, smp.Profile)); err != nil || !strings.Contains(string(data), "main;read 3") {
					t.Errorf("%s: folded profile %q, %v", name, data, err)
				}
			}
		case "served":
			if want := "the server read 10% of the 1000 bytes the job counted (min_served 90%): served from a cache"; smp.Error != want || smp.FUSE == nil {
				t.Errorf("%s: error %q, want %q", name, smp.Error, want)
			}
		}
	}
	if len(s.Checks) != 4*2*2 {
		t.Fatalf("%d check results, want 4 checks x 2 sides x 2 rounds", len(s.Checks))
	}
	want := map[string]CheckResult{
		"exit":   {ExitCode: 3, Message: "exit 3, want 0: boom"},
		"slow":   {ExitCode: 0, Message: "took 2.0s, want at most 0.5s"},
		"hang":   {ExitCode: -1, Message: "timed out"},
		"expect": {ExitCode: 1, Passed: true},
	}
	for _, c := range s.Checks {
		w := want[c.Check]
		if c.Passed != w.Passed || c.ExitCode != w.ExitCode || c.Message != w.Message {
			t.Errorf("check %+v, want %+v", c, w)
		}
	}
	for _, line := range []string{
		"  CPU profile of the guest agent: " + filepath.Join(res.Dir, "profiles", "prof-a-round1.pprof") + "\n",
		"  no profile of perf transport=uring round 2: the guest sent no profile\n",
		"  served transport=dev round 1: failed: the server read 10% of",
		"  prof transport=uring round 2: 202 ops/s\n",
		"  check exit transport=dev round 1: FAIL: exit 3, want 0: boom\n",
		"  check expect transport=uring round 2: pass\n",
	} {
		if !strings.Contains(progress.String(), line) {
			t.Errorf("progress lacks %q:\n%s", line, progress.String())
		}
	}
}

// TestRunBootFails: a kernel that does not boot fails its guest's units,
// and the run goes on; anything else from Open ends the run.
func TestRunBootFails(t *testing.T) {
	f := loadRunSpec(t, runSpec)
	t.Run("kernel", func(t *testing.T) {
		fake := &fakeOpener{t: t, open: func(g *fakeGuest) error {
			if g.index != 1 {
				return nil
			}
			g.outcome = results.Outcome{Status: results.StatusBootTimeout, Message: "no agent"}
			return &lab.KernelError{Status: "boot-timeout", Msg: "the kernel did not reach the klab agent within 30s", Console: []string{"[ 9.9] stuck"}}
		}}
		o := runOptions(t, fake)
		var progress strings.Builder
		o.Progress = &progress
		res, err := Run(context.Background(), f, o)
		if err != nil {
			t.Fatalf("Run: %v (a kernel that does not boot ends its guest, not the run)", err)
		}
		const msg = "the guest did not boot: the kernel did not reach the klab agent within 30s"
		s := readSamples(t, res.Dir)
		if len(s.Samples) != 16 || len(s.Checks) != 8 {
			t.Fatalf("%d samples and %d checks, want 16 and 8", len(s.Samples), len(s.Checks))
		}
		for _, smp := range s.Samples {
			if (smp.Round == 2) != (smp.Error == msg) {
				t.Errorf("sample %s: error %q", sampleKey(smp), smp.Error)
			}
		}
		for _, c := range s.Checks {
			if (c.Round == 2) != (c.Message == msg && !c.Passed && c.ExitCode == -1) {
				t.Errorf("check %+v", c)
			}
		}
		if len(fake.guests[1].calls) != 0 {
			t.Errorf("the guest that did not boot got %d Run calls", len(fake.guests[1].calls))
		}
		m := readManifest(t, res.Dir)
		if m.Status != StatusComplete || len(m.Guests) != 4 || m.Guests[1].Dir != filepath.Join(GuestsDirName, "g-2") || m.Guests[1].Outcome.Status != results.StatusBootTimeout {
			t.Errorf("manifest: status %q, guests %+v", m.Status, m.Guests)
		}
		if !strings.Contains(progress.String(), "\n  "+msg+"\n") {
			t.Errorf("progress lacks %q:\n%s", msg, progress.String())
		}
	})
	t.Run("infrastructure", func(t *testing.T) {
		bad := errors.New("qemu-system-x86_64 is not installed")
		fake := &fakeOpener{t: t, open: func(g *fakeGuest) error { return bad }}
		o := runOptions(t, fake)
		fake.nilGuest = true
		res, err := Run(context.Background(), f, o)
		if !errors.Is(err, bad) {
			t.Fatalf("Run: %v, want %v", err, bad)
		}
		if len(fake.guests) != 1 {
			t.Errorf("%d boots, want 1: the run stops", len(fake.guests))
		}
		m := readManifest(t, res.Dir)
		if m.Status != StatusInterrupted || m.Message != bad.Error() || len(m.Guests) != 0 {
			t.Errorf("manifest: status %q, message %q, %d guests", m.Status, m.Message, len(m.Guests))
		}
		if s := readSamples(t, res.Dir); len(s.Samples) != 0 || len(s.Checks) != 0 {
			t.Errorf("%d samples, %d checks, want none", len(s.Samples), len(s.Checks))
		}
	})
}

// TestRunEmulatorFault: under multi-threaded TCG a boot that dies of the
// emulator's false "Oops: int3" is booted again, at most twice, and kept
// apart from the kernel's results.
func TestRunEmulatorFault(t *testing.T) {
	const oops = "Oops: int3 in text_poke_bp"
	mttcg := loadRunSpec(t, strings.Replace(runSpec, "rounds: 4\n", "rounds: 4\nvm:\n  tcg_multithread: true\n", 1))
	for _, tc := range []struct {
		name string
		f    *File
		// failing boots are the first ones.
		failing int
		// boots of guest 1, its record's faults and its samples' error.
		boots  int
		faults []string
		err    string
	}{
		{"retried", mttcg, 1, 2, []string{"guests/g-1"}, ""},
		{"twice at most", mttcg, 3, 3, []string{"guests/g-1", "guests/g-2"}, "the guest did not boot: " + oops},
		{"single-threaded", loadRunSpec(t, runSpec), 1, 1, nil, "the guest did not boot: " + oops},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeOpener{t: t, open: func(g *fakeGuest) error {
				if g.index < tc.failing {
					return &lab.KernelError{Status: "kernel-panic", Msg: oops}
				}
				return nil
			}}
			var progress strings.Builder
			o := runOptions(t, fake)
			o.Progress = &progress
			res, err := Run(context.Background(), tc.f, o)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			m := readManifest(t, res.Dir)
			if len(m.Guests) != 4 || len(fake.guests) != 3+tc.boots {
				t.Fatalf("%d guests recorded, %d boots; want 4 and %d", len(m.Guests), len(fake.guests), 3+tc.boots)
			}
			g := m.Guests[0]
			if !slices.Equal(g.EmulatorFaults, tc.faults) || g.Dir != filepath.Join(GuestsDirName, "g-"+string(rune('0'+tc.boots))) {
				t.Errorf("guest 1: dir %s, emulator faults %q; want g-%d, %q", g.Dir, g.EmulatorFaults, tc.boots, tc.faults)
			}
			for _, smp := range readSamples(t, res.Dir).Samples {
				want := ""
				if smp.Round == 1 {
					want = tc.err
				}
				if smp.Error != want {
					t.Errorf("sample %s: error %q, want %q", sampleKey(smp), smp.Error, want)
				}
			}
			retried := strings.Count(progress.String(), "  the boot died of a known multi-threaded TCG fault ("+oops+"), not a kernel result; booting again\n")
			if retried != len(tc.faults) {
				t.Errorf("progress says %d retries, want %d:\n%s", retried, len(tc.faults), progress.String())
			}
		})
	}
}

// TestRunSetupFails: a kernel failure in the setup steps fails every unit
// of its guest.
func TestRunSetupFails(t *testing.T) {
	f := loadRunSpec(t, guestSpec)
	fake := &fakeOpener{t: t, step: func(g *fakeGuest, st proto.Step, d *proto.Done) error {
		if g.index == 0 && st.Kind == proto.StepExec && strings.Contains(strings.Join(st.Argv, " "), "echo setup") {
			return &lab.KernelError{Status: "kernel-panic", Msg: "BUG: in setup"}
		}
		return guestResults(g, st, d)
	}}
	res, err := Run(context.Background(), f, runOptions(t, fake))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	s := readSamples(t, res.Dir)
	const msg = "setup failed: BUG: in setup"
	n := 0
	for _, smp := range s.Samples {
		if smp.Guest == 0 {
			n++
			if smp.Error != msg {
				t.Errorf("sample %s: error %q, want %q", sampleKey(smp), smp.Error, msg)
			}
		}
	}
	for _, c := range s.Checks {
		if c.Guest == 0 {
			n++
			if c.Message != msg || c.Passed {
				t.Errorf("check %+v, want failed: %s", c, msg)
			}
		}
	}
	if n != 3*2+4*2 {
		t.Errorf("guest 1 has %d records, want 14", n)
	}
	if g := fake.guests[0]; len(g.calls) != 1 || g.closes != 1 {
		t.Errorf("guest 1: %d Run calls, %d closes; want the setup only, closed once", len(g.calls), g.closes)
	}
}

// fuseSteps compiles every unit of f's plan and returns its fuse steps
// with the parameter point each was compiled for.
func fuseSteps(t *testing.T, f *File, o PlanOptions) map[*proto.FUSEStep]map[string]string {
	t.Helper()
	p, err := MakePlan(f, o)
	if err != nil {
		t.Fatal(err)
	}
	out := map[*proto.FUSEStep]map[string]string{}
	for _, gp := range p.Guests {
		g := &guestRun{runner: &runner{f: f, plan: p}, gp: gp}
		if err := g.compile(); err != nil {
			t.Fatal(err)
		}
		for _, us := range g.units {
			for _, it := range us.items {
				for _, st := range it.steps {
					if st.Kind == proto.StepFUSE {
						out[st.FUSE] = p.Point(us.unit)
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no fuse step", f.Path)
	}
	return out
}

// TestCompileSplice: in the shipped comparisons with passthrough_hp,
// which always runs with --nosplice, klab's server copies READ data too:
// its fuse steps over /dev/fuse say no_splice, and passthrough_hp's and
// every uring step leave it out. splice=true reaches klab's server alone
// and is refused for passthrough_hp, where the file says splice.
func TestCompileSplice(t *testing.T) {
	for _, name := range []string{"fuse-bench-host.yaml", "fuse-bench-hp.yaml"} {
		f, err := LoadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		copied := 0
		for st, pt := range fuseSteps(t, f, PlanOptions{Kernels: []string{"k"}}) {
			want := pt["server"] == "passthrough" && pt["transport"] == "dev"
			if st.NoSplice != want || st.Server != pt["server"] {
				t.Errorf("%s %v: server %s, no_splice %v, want %v", name, pt, st.Server, st.NoSplice, want)
			}
			if st.NoSplice {
				copied++
			}
		}
		if copied == 0 {
			t.Errorf("%s: no step of klab's server over /dev/fuse", name)
		}

		g, err := f.WithSets(map[string]string{"server": "passthrough", "splice": "false,true"})
		if err != nil {
			t.Fatal(err)
		}
		for st, pt := range fuseSteps(t, g, PlanOptions{Kernels: []string{"k"}, Compare: "splice"}) {
			want := pt["splice"] == "false" && pt["transport"] == "dev"
			if st.NoSplice != want {
				t.Errorf("%s, klab's server alone, %v: no_splice %v, want %v", name, pt, st.NoSplice, want)
			}
		}

		_, err = f.WithSets(map[string]string{"splice": "true"})
		want := name + " (with parameters set):"
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), ": server.splice: libfuse's passthrough_hp always runs with --nosplice") {
			t.Errorf("%s with splice=true: %v, want %s...: server.splice: ...", name, err, want)
		}
	}
}
