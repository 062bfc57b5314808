// Command fidelity cross-checks klab's Go workload engine against fio
// (`make bench-fidelity`). It boots one guest and runs each job with both
// engines in it, alternating which goes first (ABBA), so that drift and
// noise hit both alike:
//
//   - seqwrite: 1 KiB sequential writes, 4 jobs, on tmpfs (the request
//     timeout seed);
//   - randread: 4 KiB random buffered reads on tmpfs;
//   - create: file creates in per-job directories on tmpfs;
//   - ftruncate: fio's ftruncate engine, 32 jobs, on ext4 on brd mounted
//     lazytime,noload,barrier=0 (the lazytime seed).
//
// For ext4 the guest's brd is reloaded with one 1 GiB ramdisk (brd
// allocates pages only when written), and formatted in the guest with the
// host's mke2fs, which the run copies into the initramfs with its shared
// libraries, as it does fio.
//
// By default the guest runs with QEMU's -icount shift=0,sleep=off: guest
// time then counts executed instructions (1 ns each), so that the other
// work on a shared 2-core TCG host does not move the numbers (in real
// time they swing by ±25% between rounds). -icount= runs in real time.
//
// It prints one line per job, `<job> go=<ops/s> fio=<ops/s> ratio=<go/fio>`
// (medians over the rounds), then the CPU cost per operation of each
// engine, split into user time (the engine's own) and system time (the
// kernel's work; the split is as coarse as the kernel's tick accounting),
// and the latency percentiles. With -profile it takes a CPU profile of the
// guest agent during each job's last Go run and writes it under -out,
// printing the top functions with `go tool pprof` when Go is installed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"klab/guest/proto"
	"klab/guest/workload"
	"klab/internal/paths"
	"klab/lab"
	"klab/results/stats"
)

// options are the command's flags.
type options struct {
	kernel   string
	rounds   int
	runtime  time.Duration
	ramp     time.Duration
	cpus     int
	memMB    int
	profile  bool
	out      string
	only     string
	cacheDir string
	runsDir  string
	verbose  bool
	fioExtra string
	icount   string
}

func main() {
	o := options{}
	flag.StringVar(&o.kernel, "kernel", "debian:7.3", "kernel to boot")
	flag.IntVar(&o.rounds, "rounds", 2, "rounds; each runs every job with both engines, alternating which goes first")
	flag.DurationVar(&o.runtime, "runtime", 4*time.Second, "measured time of each time-based run")
	flag.DurationVar(&o.ramp, "ramp", time.Second, "ramp time before measuring")
	flag.IntVar(&o.cpus, "cpus", 2, "guest vCPUs")
	flag.IntVar(&o.memMB, "memory", 2048, "guest memory in MiB")
	flag.BoolVar(&o.profile, "profile", true, "CPU-profile the guest agent during each job's last Go run")
	flag.StringVar(&o.out, "out", "", "directory for profiles (default: a new temporary directory)")
	flag.StringVar(&o.only, "jobs", "", "comma-separated subset of jobs: seqwrite,randread,create,ftruncate")
	flag.StringVar(&o.cacheDir, "cache-dir", paths.CacheDir(), "klab's cache directory")
	flag.StringVar(&o.runsDir, "runs-dir", paths.RunsDir(), "where the run is saved")
	flag.BoolVar(&o.verbose, "v", false, "print samples and guest output as they come")
	flag.StringVar(&o.icount, "icount", defaultIcount, "QEMU -icount setting: guest time counts instructions (1 ns each with shift=0), so host load does not skew the numbers; empty runs in real time")
	flag.StringVar(&o.fioExtra, "fio-extra", "", "extra fio arguments for every fio run, space-separated (e.g. --disable_lat=1)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fidelity:", err)
		os.Exit(1)
	}
}

// job is one workload of the cross-check.
type job struct {
	name string
	step proto.WorkloadStep
	// prep runs before every run of the job (both engines), in the guest.
	prep string
}

// defaultIcount makes guest time count instructions: on a shared TCG
// host, real-time numbers move by ±25% from run to run with the load.
const defaultIcount = "shift=0,sleep=off"

// Guest paths.
const (
	tmpfsDir = "/tmp/fidelity"
	ext4Dir  = "/mnt/ext4"
	brdKiB   = 1 << 20 // one 1 GiB ramdisk
)

// jobs returns the cross-check's jobs for o.
func jobs(o options) []job {
	rt, ramp := o.runtime.Milliseconds(), o.ramp.Milliseconds()
	all := []job{
		{name: "seqwrite-1k-x4-tmpfs", step: proto.WorkloadStep{
			Name: "seqwrite", Pattern: proto.PatternSeqWrite, Dir: tmpfsDir + "/seqwrite", Jobs: 4,
			BlockSize: 1 << 10, FileSize: 32 << 20, Fallocate: proto.FallocateNone,
			RampMs: ramp, RuntimeMs: rt, TimeBased: true,
		}},
		{name: "randread-4k-x2-tmpfs", step: proto.WorkloadStep{
			Name: "randread", Pattern: proto.PatternRandRead, Dir: tmpfsDir + "/randread", Jobs: 2,
			BlockSize: 4 << 10, FileSize: 32 << 20, RampMs: ramp, RuntimeMs: rt, TimeBased: true,
		}},
		{name: "create-x4-tmpfs", step: proto.WorkloadStep{
			Name: "create", Pattern: proto.PatternCreate, Dir: tmpfsDir + "/create", Jobs: 4, Files: 5000,
		}, prep: "rm -rf " + tmpfsDir + "/create"},
		{name: "ftruncate-x32-ext4", step: proto.WorkloadStep{
			Name: "write-32", Pattern: proto.PatternFtruncate, Dir: ext4Dir + "/trunc", Jobs: 32,
			BlockSize: 4 << 10, FileSize: 16 << 20, Fallocate: proto.FallocateNative, FilenameFormat: "$jobnum/t",
			RampMs: ramp, RuntimeMs: rt, TimeBased: true,
		}},
	}
	if o.only == "" {
		return all
	}
	var out []job
	for _, j := range all {
		for _, w := range strings.Split(o.only, ",") {
			if strings.HasPrefix(j.name, strings.TrimSpace(w)) {
				out = append(out, j)
			}
		}
	}
	return out
}

// setupScript prepares the guest: a tmpfs directory, and ext4 on a
// reloaded, larger brd.
func setupScript() string {
	return strings.Join([]string{
		"set -e",
		"mkdir -p " + tmpfsDir,
		fmt.Sprintf("if rmmod brd; then insmod /lib/klab/modules/brd.ko rd_nr=1 rd_size=%d; else echo 'brd cannot be reloaded: using /dev/ram0 as it is' >&2; fi", brdKiB),
		"mke2fs -F -q -t ext4 -I 256 -b 4096 /dev/ram0",
		"mkdir -p " + ext4Dir,
		"mount -t ext4 -o lazytime,noload,barrier=0 /dev/ram0 " + ext4Dir,
		"cat /proc/mounts",
	}, "\n")
}

// planned is one step of the boot, and what it measures.
type planned struct {
	job    string
	engine proto.Engine
	round  int
}

func sh(script string) proto.Step {
	return proto.Step{Kind: proto.StepExec, Argv: []string{"sh", "-c", script}}
}

func run(ctx context.Context, o options) error {
	js := jobs(o)
	if len(js) == 0 {
		return fmt.Errorf("-jobs %q matches no job, want some of seqwrite,randread,create,ftruncate", o.only)
	}
	if o.rounds < 1 {
		return fmt.Errorf("-rounds %d: want at least 1", o.rounds)
	}
	if o.out == "" {
		d, err := os.MkdirTemp("", "klab-fidelity-")
		if err != nil {
			return err
		}
		o.out = d
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}

	// One boot: setup, then for each round and job both engines, the
	// order alternating by round.
	steps := []proto.Step{sh(setupScript())}
	plan := []planned{{}}
	for r := 0; r < o.rounds; r++ {
		for _, j := range js {
			engines := []proto.Engine{proto.EngineGo, proto.EngineFio}
			if r%2 == 1 {
				engines[0], engines[1] = engines[1], engines[0]
			}
			for _, e := range engines {
				if j.prep != "" {
					steps = append(steps, sh(j.prep))
					plan = append(plan, planned{})
				}
				ws := j.step
				if e == proto.EngineGo {
					ws.Profile = o.profile && r == o.rounds-1
					steps = append(steps, proto.Step{Kind: proto.StepWorkload, Workload: &ws})
				} else {
					fs, err := workload.FioStepFor(&ws)
					if err != nil {
						return fmt.Errorf("%s: %w", j.name, err)
					}
					fs.Args = append(fs.Args, strings.Fields(o.fioExtra)...)
					steps = append(steps, proto.Step{Kind: proto.StepFio, Fio: fs})
				}
				plan = append(plan, planned{job: j.name, engine: e, round: r})
			}
		}
	}

	lo := &lab.Options{CacheDir: o.cacheDir, RunsDir: o.runsDir, Progress: os.Stderr}
	var guestOut io.Writer = io.Discard
	if o.verbose {
		guestOut = os.Stderr
	}
	var qemuArgs []string
	if o.icount != "" {
		qemuArgs = []string{"-icount", o.icount}
	}
	start := time.Now()
	res, err := lo.Boot(ctx, lab.BootRequest{
		QEMUArgs:  qemuArgs,
		Kernel:    o.kernel,
		CPUs:      o.cpus,
		MemMB:     o.memMB,
		HostTools: []string{"mke2fs"},
		// A kernel report is printed below, not a reason to lose the
		// numbers.
		IgnoreSplats: true,
		Steps:        steps,
		Stdout:       guestOut,
		Stderr:       guestOut,
		OnMessage: func(m *proto.Message) {
			switch {
			case m.Kind == proto.KindSample && o.verbose:
				s := m.Sample
				fmt.Fprintf(os.Stderr, "  sample step %d %-3s %-10s t=%5dms %10.0f ops/s%s\n", s.Step, s.Engine, s.Name, s.ElapsedMs, s.OpsPerSec, map[bool]string{true: " (ramp)"}[s.Ramp])
			case m.Kind == proto.KindOutput && m.Output.Stream == proto.Stderr:
				fmt.Fprintf(os.Stderr, "  guest: %s", m.Output.Data)
			}
		},
		Command: os.Args,
	})
	if err != nil {
		if res != nil && len(res.Steps) > 0 {
			last := res.Steps[len(res.Steps)-1]
			return fmt.Errorf("%w (last step %s: exit %d %s)", err, last.Step.Kind, last.Done.ExitCode, last.Done.Error)
		}
		return err
	}
	if len(res.Steps) != len(steps) {
		return fmt.Errorf("%d of %d steps finished", len(res.Steps), len(steps))
	}
	if d := res.Steps[0].Done; d.ExitCode != 0 {
		return fmt.Errorf("guest setup failed (exit %d %s): see %s/events.jsonl", d.ExitCode, d.Error, res.RunDir)
	}

	// Collect.
	type perEngine struct {
		ops, cpu, user, sys, p50, p99, p999 []float64
		version                             string
		profile                             []byte
	}
	byJob := map[string]map[proto.Engine]*perEngine{}
	for i, p := range plan {
		if p.job == "" {
			if d := res.Steps[i].Done; d.ExitCode != 0 {
				return fmt.Errorf("step %d (%s) failed: exit %d %s", i, strings.Join(res.Steps[i].Step.Argv, " "), d.ExitCode, d.Error)
			}
			continue
		}
		m := res.Steps[i].Done.Metrics
		if m == nil {
			return fmt.Errorf("%s %s round %d: no metrics", p.job, p.engine, p.round)
		}
		if byJob[p.job] == nil {
			byJob[p.job] = map[proto.Engine]*perEngine{}
		}
		e := byJob[p.job][p.engine]
		if e == nil {
			e = &perEngine{}
			byJob[p.job][p.engine] = e
		}
		e.ops = append(e.ops, m.OpsPerSec)
		e.cpu = append(e.cpu, m.CPU.PerOpNs)
		e.user = append(e.user, m.CPU.UserPerOpNs)
		e.sys = append(e.sys, m.CPU.PerOpNs-m.CPU.UserPerOpNs)
		e.p50 = append(e.p50, float64(m.Latency.P50Ns))
		e.p99 = append(e.p99, float64(m.Latency.P99Ns))
		e.p999 = append(e.p999, float64(m.Latency.P999Ns))
		e.version = m.EngineVersion
		if len(m.CPUProfile) > 0 {
			e.profile = m.CPUProfile
		}
	}

	m := res.Manifest
	clock := "real time"
	if o.icount != "" {
		clock = "virtual time (-icount " + o.icount + ")"
	}
	fmt.Printf("klab bench-fidelity, %s, kernel %s (%s) under %s in %s, %d vCPUs, %d rounds of %v (ramp %v), %s, guest run %.0fs, saved to %s\n",
		time.Now().UTC().Format(time.RFC3339), m.Kernel.Name, m.Kernel.Version, m.Accel, clock, o.cpus, o.rounds, o.runtime, o.ramp,
		byJob[js[0].name][proto.EngineFio].version, time.Since(start).Seconds(), res.RunDir)
	fmt.Println()
	inRange := 0
	for _, j := range js {
		g, f := byJob[j.name][proto.EngineGo], byJob[j.name][proto.EngineFio]
		ratio := median(g.ops) / median(f.ops)
		if ratio >= 0.95 && ratio <= 1.05 {
			inRange++
		}
		fmt.Printf("%s go=%.0f fio=%.0f ratio=%.3f\n", j.name, median(g.ops), median(f.ops), ratio)
	}
	fmt.Println()
	fmt.Println("Time inside one operation (the kernel's part), median p50 ns:")
	for _, j := range js {
		g, f := byJob[j.name][proto.EngineGo], byJob[j.name][proto.EngineFio]
		fmt.Printf("  %-22s go=%.0f fio=%.0f ratio=%.3f\n", j.name, median(g.p50), median(f.p50), median(g.p50)/median(f.p50))
	}
	fmt.Println()
	fmt.Println("CPU per operation (median ns: total = user + sys), latency p50/p99/p99.9 (median ns), every round's ops/s:")
	for _, j := range js {
		for _, e := range []proto.Engine{proto.EngineGo, proto.EngineFio} {
			pe := byJob[j.name][e]
			fmt.Printf("  %-22s %-3s cpu/op %7.0f = %6.0f + %7.0f   p50 %7.0f  p99 %9.0f  p99.9 %9.0f   ops/s %s\n", j.name, e,
				median(pe.cpu), median(pe.user), median(pe.sys), median(pe.p50), median(pe.p99), median(pe.p999), list(pe.ops))
		}
	}
	fmt.Printf("\n%d of %d jobs within 0.95..1.05\n", inRange, len(js))
	for _, sp := range res.Splats {
		fmt.Printf("kernel report during the run: %s\n", sp.Title)
	}

	if o.profile {
		fmt.Println()
		for _, j := range js {
			prof := byJob[j.name][proto.EngineGo].profile
			if len(prof) == 0 {
				continue
			}
			path := filepath.Join(o.out, j.name+".pprof")
			if err := os.WriteFile(path, prof, 0o644); err != nil {
				return err
			}
			fmt.Printf("Go engine CPU profile of %s: %s\n", j.name, path)
			if top, err := pprofTop(ctx, path); err == nil {
				fmt.Println(top)
			}
		}
	}
	return nil
}

// pprofTop returns the top of `go tool pprof -top` for a profile.
func pprofTop(ctx context.Context, path string) (string, error) {
	if _, err := exec.LookPath("go"); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=12", path).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("pprof: %w: %s", err, ee.Stderr)
		}
		return "", fmt.Errorf("pprof: %w", err)
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.String(), nil
}

func median(v []float64) float64 { return stats.Median(v) }

func list(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf("%.0f", x))
	}
	return strings.Join(s, " ")
}
