// Command klab-bench-build measures kernel builds from source through klab
// against a bare make of the same tree and config:
//
//   - a cold build of Debian's linux-source-7.3 with the lab config and a
//     one-line patch, through `klab kernels build` with an empty cache
//     (unpacking included), against a bare tinyconfig + merge_config.sh +
//     olddefconfig + make bzImage of the same, already unpacked, tree;
//   - a rebuild after the patch changed, end to end through klab;
//   - a cache hit;
//   - the boot-to-agent time of the lab kernel against debian:7.3, under
//     the accelerator klab picks, alternating the two;
//   - the size of the bzImage.
//
// It is what `make bench-build` runs. A cold build takes about 6 minutes
// on 2 cores, and the bench runs two of them per -pairs, alternating
// which goes first.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"klab/images"
	"klab/images/debian"
	"klab/internal/proc"
	"klab/internal/units"
	"klab/results"
	"klab/results/stats"
)

func main() {
	klab := flag.String("klab", "bin/klab", "the klab binary")
	series := flag.String("series", "7.3", "the Debian kernel source series")
	n := flag.Int("n", 5, "boots per kernel, and cache hits")
	rebuilds := flag.Int("rebuilds", 3, "rebuilds after a patch change")
	pairs := flag.Int("pairs", 1, "cold builds of each kind (klab, bare make), alternating their order")
	skipBare := flag.Bool("skip-bare", false, "skip the bare make (about 6 minutes each)")
	flag.Parse()
	if err := run(*klab, *series, *n, *rebuilds, *pairs, *skipBare); err != nil {
		fmt.Fprintln(os.Stderr, "klab-bench-build:", err)
		os.Exit(1)
	}
}

// patch is a one-line patch to fs/fuse/inode.c printing msg at FUSE init.
func patch(msg string) string {
	return `From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: klab bench <bench@example.org>
Subject: [PATCH] fuse: bench ` + msg + `

---
diff --git a/fs/fuse/inode.c b/fs/fuse/inode.c
--- a/fs/fuse/inode.c
+++ b/fs/fuse/inode.c
@@ -2143,6 +2143,7 @@ static int __init fuse_init(void)
 
 	pr_info("init (API version %i.%i)\n",
 		FUSE_KERNEL_VERSION, FUSE_KERNEL_MINOR_VERSION);
+	pr_info("klab-bench: ` + msg + `\n");
 
 	INIT_LIST_HEAD(&fuse_conn_list);
 	res = fuse_fs_init();
`
}

func run(klab, series string, n, rebuilds, pairs int, skipBare bool) error {
	ctx := context.Background()
	klab, err := filepath.Abs(klab)
	if err != nil {
		return err
	}
	src, err := debian.FetchSource(ctx, "debian:"+series, debian.Options{Progress: os.Stderr})
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "klab-bench-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	jobs := runtime.NumCPU()
	gcc, _ := exec.Command("gcc", "--version").Output()
	fmt.Printf("klab-bench-build: %s %s, %d CPUs, %s\n", src.Package, src.Version, jobs, strings.SplitN(string(gcc), "\n", 2)[0])
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("load average at start: %s", la)
	}

	var patches []string
	for i := 0; i <= rebuilds+1; i++ {
		p := filepath.Join(tmp, fmt.Sprintf("v%d.patch", i))
		if err := os.WriteFile(p, []byte(patch(fmt.Sprintf("version %d", i))), 0o644); err != nil {
			return err
		}
		patches = append(patches, p)
	}
	var cache string
	kbuild := func(p, name string) (time.Duration, time.Duration, error) {
		start := time.Now()
		cpu, err := cpuRun(ctx, "", nil, os.Stderr, klab, "--cache-dir", cache, "kernels", "build",
			"--tarball", src.Tarball, "--config", "lab", "--patches", p, "--name", name)
		return time.Since(start), cpu, err
	}

	// Cold builds, alternating which kind goes first so that a change in
	// the machine's load hits both alike. Each klab build starts from an
	// empty cache; the bare make's tree is unpacked before its clock
	// starts, klab's unpacking is counted.
	var bares, colds, bareCPU, coldCPU []float64
	for i := 0; i < pairs; i++ {
		kinds := []string{"bare", "klab"}
		if i%2 == 1 {
			kinds = []string{"klab", "bare"}
		}
		for _, kind := range kinds {
			if kind == "bare" {
				if skipBare {
					continue
				}
				d, cpu, err := bareMake(ctx, filepath.Join(tmp, fmt.Sprintf("bare%d", i)), src.Tarball, jobs)
				if err != nil {
					return err
				}
				os.RemoveAll(filepath.Join(tmp, fmt.Sprintf("bare%d", i)))
				bares, bareCPU = append(bares, d.Seconds()), append(bareCPU, cpu.Seconds())
				fmt.Printf("bare make (tinyconfig + lab, olddefconfig, make -j%d bzImage): %.1fs, CPU %.1fs, %s",
					jobs, d.Seconds(), cpu.Seconds(), loadavg())
				continue
			}
			if cache != "" {
				os.RemoveAll(cache)
			}
			cache = filepath.Join(tmp, fmt.Sprintf("cache%d", i))
			d, cpu, err := kbuild(patches[0], "bench")
			if err != nil {
				return fmt.Errorf("cold build: %w", err)
			}
			colds, coldCPU = append(colds, d.Seconds()), append(coldCPU, cpu.Seconds())
			fmt.Printf("cold build through klab (unpack, patch, config, make, install): %.1fs, CPU %.1fs, %s",
				d.Seconds(), cpu.Seconds(), loadavg())
		}
	}
	fmt.Printf("cold build through klab: %s; CPU %s\n", stats.Seconds(colds), stats.Seconds(coldCPU))
	if len(bares) > 0 {
		fmt.Printf("bare make:               %s; CPU %s\n", stats.Seconds(bares), stats.Seconds(bareCPU))
		// Wall time swings with other users of the machine; CPU time
		// (klab's and its children's, make's and its children's) does not.
		fmt.Printf("klab / bare make (medians): wall %.3f, CPU %.3f\n", stats.Median(colds)/stats.Median(bares), stats.Median(coldCPU)/stats.Median(bareCPU))
	}
	k, err := show(ctx, klab, cache, "build:bench")
	if err != nil {
		return err
	}
	if fi, err := os.Stat(k.Image); err == nil {
		fmt.Printf("bzImage: %d bytes (%s), release %s\n", fi.Size(), units.Bytes(fi.Size()), k.Version)
	}

	var reb []float64
	for i := 1; i <= rebuilds; i++ {
		d, _, err := kbuild(patches[i], "bench")
		if err != nil {
			return fmt.Errorf("rebuild %d: %w", i, err)
		}
		reb = append(reb, d.Seconds())
	}
	fmt.Printf("rebuild after a one-file patch change, end to end: %s\n", stats.Seconds(reb))

	var hits []float64
	for i := 0; i < n; i++ {
		d, _, err := kbuild(patches[rebuilds], "bench")
		if err != nil {
			return fmt.Errorf("cache hit: %w", err)
		}
		hits = append(hits, d.Seconds())
	}
	fmt.Printf("cache hit: %s\n", stats.Seconds(hits))

	// Boot-to-agent, alternating the kernels so that noise hits both. The
	// boots use the default cache (where debian:<series> and the initramfs
	// parts usually are already), so the lab kernel goes by its path.
	refs := []string{k.Image, "debian:" + series}
	label := map[string]string{k.Image: "lab (build)", refs[1]: refs[1]}
	b2a := map[string][]float64{}
	accel := ""
	for i := 0; i < n; i++ {
		for _, ref := range refs {
			runs := filepath.Join(tmp, "runs")
			os.RemoveAll(runs)
			if _, err := proc.Run(ctx, proc.Opts{}, klab, "--runs-dir", runs, "boot", "--kernel", ref, "--", "true"); err != nil {
				return fmt.Errorf("boot %s: %w", ref, err)
			}
			des, _ := os.ReadDir(runs)
			if len(des) != 1 {
				return fmt.Errorf("boot %s: %d runs", ref, len(des))
			}
			m, err := results.ReadManifest(filepath.Join(runs, des[0].Name()))
			if err != nil {
				return err
			}
			accel = string(m.Accel)
			b2a[ref] = append(b2a[ref], float64(m.Times.BootToAgentMs)/1000)
		}
	}
	for _, ref := range refs {
		fmt.Printf("boot-to-agent %-12s under %s: %s\n", label[ref], accel, stats.Seconds(b2a[ref]))
	}
	return nil
}

// cpuRun runs argv and returns the CPU time (user and system) of it and
// of every descendant it waited for.
func cpuRun(ctx context.Context, dir string, env []string, stderr io.Writer, argv ...string) (time.Duration, error) {
	cmd := proc.Command(ctx, argv...)
	cmd.Dir, cmd.Stderr = dir, stderr
	if env != nil {
		cmd.Env = env
	}
	err := cmd.Run()
	if cmd.ProcessState == nil {
		return 0, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if err != nil {
		return cpu, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return cpu, nil
}

func loadavg() string {
	la, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(la))
	if len(f) < 3 {
		return "\n"
	}
	return "load average " + strings.Join(f[:3], " ") + "\n"
}

// bareMake unpacks tarball (not timed) and times a plain build of it with
// klab's lab fragment; it returns the wall and CPU times.
func bareMake(ctx context.Context, tmp, tarball string, jobs int) (time.Duration, time.Duration, error) {
	dir := filepath.Join(tmp, "tree")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	if _, err := proc.Run(ctx, proc.Opts{}, "tar", "-x", "-f", tarball, "-C", dir); err != nil {
		return 0, 0, err
	}
	des, err := os.ReadDir(dir)
	if err != nil || len(des) != 1 {
		return 0, 0, fmt.Errorf("unpacking %s: want one top directory", tarball)
	}
	tree := filepath.Join(dir, des[0].Name())
	frag := filepath.Join(tmp, "lab")
	data, err := images.ConfigFragment("lab")
	if err != nil {
		return 0, 0, err
	}
	if err := os.WriteFile(frag, data, 0o644); err != nil {
		return 0, 0, err
	}
	out := filepath.Join(tmp, "bare-out")
	var cpu time.Duration
	mk := func(args ...string) error {
		c, err := cpuRun(ctx, tree, nil, io.Discard, append([]string{"make", "O=" + out, "ARCH=x86_64"}, args...)...)
		cpu += c
		return err
	}
	start := time.Now()
	if err := mk("tinyconfig"); err != nil {
		return 0, 0, err
	}
	c, err := cpuRun(ctx, tree, append(os.Environ(), "ARCH=x86_64"), io.Discard,
		"scripts/kconfig/merge_config.sh", "-m", "-O", out, filepath.Join(out, ".config"), frag)
	cpu += c
	if err != nil {
		return 0, 0, err
	}
	if err := mk("olddefconfig"); err != nil {
		return 0, 0, err
	}
	if err := mk("-j"+strconv.Itoa(jobs), "bzImage"); err != nil {
		return 0, 0, err
	}
	return time.Since(start), cpu, nil
}

func show(ctx context.Context, klab, cache, ref string) (*results.Kernel, error) {
	out, err := proc.Run(ctx, proc.Opts{}, klab, "--cache-dir", cache, "kernels", "show", "--json", ref)
	if err != nil {
		return nil, err
	}
	var k results.Kernel
	if err := json.Unmarshal(out, &k); err != nil {
		return nil, fmt.Errorf("kernels show: %w", err)
	}
	return &k, nil
}
