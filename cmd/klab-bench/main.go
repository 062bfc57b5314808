// Command klab-bench measures klab's end-to-end figures side by side with
// bare QEMU, in one run, alternating the two so that machine noise hits
// both alike:
//
//   - boot-to-agent time and whole `klab boot -- true` wall time, against
//     the same kernel booted by a bare qemu-system-x86_64 command with a
//     trivial static init (time to its first line, and whole process);
//   - initramfs build time, cold (empty cache) and cached;
//   - the host RSS of one idle VM.
//
// It is what `make bench` runs.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"klab/results/stats"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/u-root/mkuimage/cpio"

	"klab/internal/procfs"
	"klab/results"
)

func main() {
	klab := flag.String("klab", "bin/klab", "the klab binary")
	kernels := flag.String("kernels", "debian:6.1,debian:7.3", "comma-separated kernel references")
	n := flag.Int("n", 5, "pairs per kernel")
	skipCold := flag.Bool("skip-cold", false, "skip the cold initramfs build (about 30 s)")
	flag.Parse()
	if err := run(*klab, strings.Split(*kernels, ","), *n, *skipCold); err != nil {
		fmt.Fprintln(os.Stderr, "klab-bench:", err)
		os.Exit(1)
	}
}

func run(klab string, kernels []string, n int, skipCold bool) error {
	tmp, err := os.MkdirTemp("", "klab-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bare, err := bareInitramfs(tmp)
	if err != nil {
		return err
	}
	qv, _ := exec.Command("qemu-system-x86_64", "--version").Output()
	fmt.Printf("klab bench, %s, %s\n", time.Now().UTC().Format(time.RFC3339), strings.SplitN(string(qv), "\n", 2)[0])

	for _, ref := range kernels {
		out, err := exec.Command(klab, "kernels", "show", "--json", ref).Output()
		if err != nil {
			return fmt.Errorf("kernels show %s: %w", ref, err)
		}
		var k struct{ Image, Version string }
		if err := json.Unmarshal(out, &k); err != nil {
			return err
		}
		runs := filepath.Join(tmp, "runs-"+strings.ReplaceAll(ref, ":", "-"))
		// Warm caches (initramfs, accelerator verdict), and learn the
		// machine type klab boots, for the bare boots to use the same.
		if err := exec.Command(klab, "--runs-dir", runs, "boot", "--accel", "tcg", "--kernel", ref, "--", "true").Run(); err != nil {
			return fmt.Errorf("warm-up boot of %s: %w", ref, err)
		}
		machine, cpu, err := klabMachine(runs)
		if err != nil {
			return err
		}
		var kAgent, kWall, bInit, bWall, rAgent, rWall []float64
		for i := 0; i < n; i++ {
			ba, bw, err := bareBoot(k.Image, bare, machine, cpu)
			if err != nil {
				return fmt.Errorf("bare boot of %s: %w", ref, err)
			}
			ka, kw, err := klabBoot(klab, runs, ref)
			if err != nil {
				return fmt.Errorf("klab boot of %s: %w", ref, err)
			}
			bInit, bWall = append(bInit, ba), append(bWall, bw)
			kAgent, kWall = append(kAgent, ka), append(kWall, kw)
			rAgent, rWall = append(rAgent, ka/ba), append(rWall, kw/bw)
		}
		fmt.Printf("\n%s (%s), TCG, machine %s, CPU %s, %d pairs:\n", ref, k.Version, machine, cpu, n)
		fmt.Printf("  boot to first guest line  bare qemu + static init: %s\n", stats.Seconds(bInit))
		fmt.Printf("  boot to agent ready       klab:                    %s\n", stats.Seconds(kAgent))
		fmt.Printf("  ratio klab/bare (pairwise median):                 %.3f×\n", stats.Median(rAgent))
		fmt.Printf("  whole process             bare qemu:               %s\n", stats.Seconds(bWall))
		fmt.Printf("  whole `klab boot -- true` klab:                    %s\n", stats.Seconds(kWall))
		fmt.Printf("  ratio klab/bare (pairwise median):                 %.3f×\n", stats.Median(rWall))
	}

	ref := kernels[len(kernels)-1]
	if !skipCold {
		cold, cached, err := initramfsTimes(klab, tmp, ref)
		if err != nil {
			return err
		}
		fmt.Printf("\ninitramfs for %s: cold (empty cache: u-root base + agent) %.1fs, cached %.3fs\n", ref, cold, cached)
	} else {
		_, cached, err := initramfsCached(klab, ref)
		if err != nil {
			return err
		}
		fmt.Printf("\ninitramfs for %s: cached %.3fs\n", ref, cached)
	}
	rss, err := idleRSS(klab, tmp, ref)
	if err != nil {
		return err
	}
	fmt.Printf("host RSS of one idle VM (%s, 1024 MiB guest): qemu %d MiB\n", ref, rss>>10)
	return nil
}

// bareInitramfs builds the trivial static init into a cpio.
func bareInitramfs(dir string) (string, error) {
	bin := filepath.Join(dir, "init")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/klab-bench/bareinit")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build bare init: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "bare.cpio")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	w := cpio.Newc.Writer(f)
	if err := cpio.WriteRecords(w, []cpio.Record{cpio.Directory("dev", 0o755), cpio.StaticFile("init", string(b), 0o755)}); err != nil {
		return "", err
	}
	if err := cpio.WriteTrailer(w); err != nil {
		return "", err
	}
	return path, f.Close()
}

// klabMachine returns the QEMU machine type and CPU model of the newest
// run in runs.
func klabMachine(runs string) (machine, cpu string, err error) {
	m, err := newestManifest(runs)
	if err != nil {
		return "", "", err
	}
	for i, a := range m.QEMU.Argv[:max(len(m.QEMU.Argv)-1, 0)] {
		switch a {
		case "-machine":
			machine = m.QEMU.Argv[i+1]
		case "-cpu":
			cpu = m.QEMU.Argv[i+1]
		}
	}
	if machine == "" || cpu == "" {
		return "", "", fmt.Errorf("the run in %s names no -machine or -cpu in its QEMU command line", runs)
	}
	return machine, cpu, nil
}

// newestManifest reads the manifest of the newest run in runs.
func newestManifest(runs string) (*results.Manifest, error) {
	entries, err := os.ReadDir(runs)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no run in %s", runs)
	}
	sort.Strings(names)
	return results.ReadManifest(filepath.Join(runs, names[len(names)-1]))
}

// bareBoot boots image with the bare init using the same machine settings
// as klab (machine type, single-threaded TCG, CPU, memory), and returns the
// time to the init's line and the whole process time, in seconds.
func bareBoot(image, initrd, machine, cpu string) (float64, float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64",
		"-machine", machine, "-accel", "tcg,thread=single", "-cpu", cpu, "-m", "1024", "-smp", "2",
		"-kernel", image, "-initrd", initrd,
		"-append", "console=ttyS0,115200 panic=-1",
		"-nographic", "-no-reboot", "-nodefaults", "-nic", "none", "-serial", "stdio", "-monitor", "none")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	var reached float64
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if reached == 0 && strings.Contains(sc.Text(), "klab-bench: bare init reached") {
			reached = time.Since(start).Seconds()
		}
	}
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return 0, 0, err
	}
	if reached == 0 {
		return 0, 0, fmt.Errorf("the bare init never printed its line")
	}
	return reached, time.Since(start).Seconds(), nil
}

// klabBoot runs `klab boot -- true` and returns boot-to-agent and wall
// seconds.
func klabBoot(klab, runs, ref string) (float64, float64, error) {
	before, _ := os.ReadDir(runs)
	start := time.Now()
	cmd := exec.Command(klab, "--runs-dir", runs, "boot", "--accel", "tcg", "--kernel", ref, "--", "true")
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, 0, fmt.Errorf("%v\n%s", err, out)
	}
	wall := time.Since(start).Seconds()
	after, _ := os.ReadDir(runs)
	if len(after) != len(before)+1 {
		return 0, 0, fmt.Errorf("no new run in %s", runs)
	}
	m, err := newestManifest(runs)
	if err != nil {
		return 0, 0, err
	}
	return float64(m.Times.BootToAgentMs) / 1000, wall, nil
}

// initramfsTimes builds the initramfs in an empty cache (the kernel itself
// is linked in, not fetched), then again from the cache.
func initramfsTimes(klab, tmp, ref string) (cold, cached float64, err error) {
	cache := filepath.Join(tmp, "cold-cache")
	src, _ := exec.Command(klab, "doctor", "--json", "--probe=false").Output()
	_ = src
	home, _ := os.UserCacheDir()
	def := os.Getenv("KLAB_CACHE_DIR")
	if def == "" {
		def = filepath.Join(home, "klab")
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return 0, 0, err
	}
	if err := os.Symlink(filepath.Join(def, "kernels"), filepath.Join(cache, "kernels")); err != nil {
		return 0, 0, err
	}
	build := func() (float64, error) {
		start := time.Now()
		cmd := exec.Command(klab, "--cache-dir", cache, "initramfs", "--kernel", ref)
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("klab initramfs: %v\n%s", err, out)
		}
		return time.Since(start).Seconds(), nil
	}
	// A cold build still finds Go's own build cache warm; clean it for the
	// u-root packages only would be intrusive, so say so.
	if cold, err = build(); err != nil {
		return 0, 0, err
	}
	if cached, err = build(); err != nil {
		return 0, 0, err
	}
	return cold, cached, nil
}

func initramfsCached(klab, ref string) (float64, float64, error) {
	start := time.Now()
	if out, err := exec.Command(klab, "initramfs", "--kernel", ref).CombinedOutput(); err != nil {
		return 0, 0, fmt.Errorf("klab initramfs: %v\n%s", err, out)
	}
	d := time.Since(start).Seconds()
	return d, d, nil
}

// idleRSS boots a guest that sleeps and reads its QEMU's VmRSS in KiB
// once the agent is up.
func idleRSS(klab, tmp, ref string) (int, error) {
	cmd := exec.Command(klab, "--runs-dir", filepath.Join(tmp, "rss"), "boot", "--kernel", ref, "--", "sleep", "15")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), " ready after ") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	time.Sleep(3 * time.Second)
	pid := procfs.ChildNamed(cmd.Process.Pid, "qemu-system-x86")
	if pid == 0 {
		return 0, fmt.Errorf("no qemu child of klab")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("no VmRSS for %d", pid)
}
