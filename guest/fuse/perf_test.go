package fuse

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"os/exec"

	"golang.org/x/sys/unix"

	"klab/images"
	"klab/internal/testenv"
)

// seqWrite runs jobs writers, each writing bs-byte blocks sequentially to
// its own file under dir for d (the seed's job a: fio --rw=write --bs=1k
// --numjobs=4 --ioengine=sync). It returns the bytes written per second.
func seqWrite(dir string, jobs, bs int, d time.Duration) (float64, error) {
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, jobs)
	start := time.Now()
	deadline := start.Add(d)
	for j := 0; j < jobs; j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fd, err := unix.Open(filepath.Join(dir, "seqwrite."+strconv.Itoa(j)), unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
			if err != nil {
				errs <- err
				return
			}
			defer unix.Close(fd)
			buf := make([]byte, bs)
			var n int64
			for i := 0; ; i++ {
				if i%256 == 0 && time.Now().After(deadline) {
					break
				}
				w, err := unix.Write(fd, buf)
				if err != nil {
					errs <- err
					return
				}
				n += int64(w)
			}
			total.Add(n)
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(total.Load()) / time.Since(start).Seconds(), nil
}

// creates runs jobs creators, each creating empty files in its own
// directory under dir (open O_CREAT|O_EXCL, close) for d or up to perJob
// files: the passthrough servers keep a descriptor per file they have
// seen, and the open file limit may be low. It returns creates per second.
func creates(dir string, jobs, perJob int, d time.Duration) (float64, error) {
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, jobs)
	start := time.Now()
	deadline := start.Add(d)
	for j := 0; j < jobs; j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub := filepath.Join(dir, "creates."+strconv.Itoa(j))
			if err := os.Mkdir(sub, 0o755); err != nil {
				errs <- err
				return
			}
			var n int64
			for i := 0; i < perJob; i++ {
				if i%64 == 0 && time.Now().After(deadline) {
					break
				}
				fd, err := unix.Open(filepath.Join(sub, "f"+strconv.Itoa(i)), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
				if err != nil {
					errs <- err
					return
				}
				unix.Close(fd)
				n++
			}
			total.Add(n)
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(total.Load()) / time.Since(start).Seconds(), nil
}

// clientEnv makes the test binary a load generator (see TestMain), so
// that the client of both servers is a separate process, as fio is.
const clientEnv = "KLAB_FUSE_PERF_CLIENT"

// runClient runs the load generator in a child process: "seqwrite DIR
// JOBS BS SECONDS" or "creates DIR JOBS PERJOB SECONDS". It returns the
// number it prints (bytes/s or creates/s).
func runClient(args ...string) (float64, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), clientEnv+"="+strings.Join(args, " "))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("client %v: %w\n%s", args, err, out)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		return 0, fmt.Errorf("client %v printed %q", args, out)
	}
	return v, nil
}

// clientMain is the load generator's main.
func clientMain(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 5 {
		fmt.Fprintf(os.Stderr, "bad %s=%q\n", clientEnv, spec)
		return 2
	}
	jobs, _ := strconv.Atoi(f[2])
	n, _ := strconv.Atoi(f[3])
	secs, _ := strconv.ParseFloat(f[4], 64)
	d := time.Duration(secs * float64(time.Second))
	var v float64
	var err error
	switch f[0] {
	case "seqwrite":
		v, err = seqWrite(f[1], jobs, n, d)
	case "creates":
		v, err = creates(f[1], jobs, n, d)
	default:
		err = fmt.Errorf("unknown workload %q", f[0])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(v)
	return 0
}

// perfServer is one server configuration of the comparison.
type perfServer struct {
	name string
	cfg  Config
}

func perfServers(libfuse string) []perfServer {
	klab := func(threads int) Config {
		c := DefaultConfig()
		c.Threads = threads
		return c
	}
	lf := func(threads int) Config {
		c := DefaultConfig()
		c.Server, c.LibfusePath, c.Threads = ServerLibfusePassthroughLL, libfuse, threads
		return c
	}
	return []perfServer{
		{"klab-t1", klab(1)}, {"libfuse-t1", lf(1)},
		{"klab-t4", klab(4)}, {"libfuse-t4", lf(4)},
	}
}

// withServer mounts cfg over fresh directories under dir, runs fn on the
// mount point and tears down.
func withServer(dir string, cfg Config, fn func(mnt string) error) error {
	cfg.Mountpoint, cfg.Backing = filepath.Join(dir, "mnt"), filepath.Join(dir, "backing")
	s, err := Start(context.Background(), cfg)
	if err != nil {
		return err
	}
	ferr := fn(cfg.Mountpoint)
	if err := s.Close(); err != nil && ferr == nil {
		ferr = err
	}
	os.RemoveAll(dir)
	return ferr
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// TestPerfCompare measures klab's passthrough against libfuse's
// passthrough_ll, built from the host's libfuse3-dev examples, in one run
// (KLAB_FUSE_PERF=1; KLAB_FUSE_PERF_SECONDS sets each measurement's length,
// KLAB_FUSE_PERF_ROUNDS the rounds). Rounds alternate the servers; the
// table shows medians and klab/libfuse ratios.
func TestPerfCompare(t *testing.T) {
	testenv.OptIn(t, "KLAB_FUSE_PERF", "performance comparison (takes minutes)")
	requireFUSE(t)
	libfuse, err := images.BuildPassthroughLL(context.Background(), t.TempDir(), nil)
	if err != nil {
		testenv.Missingf(t, "cannot build libfuse's passthrough_ll: %v", err)
	}
	secs, rounds := 5.0, 3
	if v, err := strconv.ParseFloat(os.Getenv("KLAB_FUSE_PERF_SECONDS"), 64); err == nil && v > 0 {
		secs = v
	}
	if v, err := strconv.Atoi(os.Getenv("KLAB_FUSE_PERF_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	// Stay below the open file limit: the in-process server holds a
	// descriptor per created file.
	var lim unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	maxCreates := int(min(lim.Cur*3/4, 200000))
	type job struct {
		name string
		unit string
		run  func(mnt string) (float64, error)
	}
	sec := strconv.FormatFloat(secs, 'f', -1, 64)
	jobs := []job{
		{"seqwrite 4x1KiB", "MiB/s", func(m string) (float64, error) {
			v, err := runClient("seqwrite", m, "4", "1024", sec)
			return v / (1 << 20), err
		}},
		{"creates 1 job", "creates/s", func(m string) (float64, error) { return runClient("creates", m, "1", strconv.Itoa(maxCreates), sec) }},
		{"creates 4 jobs", "creates/s", func(m string) (float64, error) { return runClient("creates", m, "4", strconv.Itoa(maxCreates/4), sec) }},
	}
	servers := perfServers(libfuse)
	res := map[string]map[string][]float64{}
	for r := 0; r < rounds; r++ {
		for _, j := range jobs {
			for _, s := range servers {
				var v float64
				err := withServer(perfDir(t), s.cfg, func(mnt string) error {
					var err error
					v, err = j.run(mnt)
					return err
				})
				if err != nil {
					t.Fatalf("%s on %s: %v", j.name, s.name, err)
				}
				if res[j.name] == nil {
					res[j.name] = map[string][]float64{}
				}
				res[j.name][s.name] = append(res[j.name][s.name], v)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-18s %-10s %12s %12s %12s %12s %8s %8s\n", "job", "unit", "klab-t1", "libfuse-t1", "klab-t4", "libfuse-t4", "t1", "t4")
	for _, j := range jobs {
		m := func(n string) float64 { return median(res[j.name][n]) }
		fmt.Fprintf(&b, "%-18s %-10s %12.1f %12.1f %12.1f %12.1f %8.2f %8.2f\n", j.name, j.unit,
			m("klab-t1"), m("libfuse-t1"), m("klab-t4"), m("libfuse-t4"),
			m("klab-t1")/m("libfuse-t1"), m("klab-t4")/m("libfuse-t4"))
	}
	t.Logf("medians of %d rounds of %.0fs on %d CPUs (ratios klab/libfuse):%s", rounds, secs, numCPU(), b.String())
}

// TestPerfTimeoutCost measures the cost of turning request timeouts on:
// the seed's job a) on klab's passthrough (4 threads) and on libfuse's
// passthrough_ll (max_threads=4), with fs.fuse.default_request_timeout 0
// and 500 set before mounting, alternating (KLAB_FUSE_PERF=1).
func TestPerfTimeoutCost(t *testing.T) {
	testenv.OptIn(t, "KLAB_FUSE_PERF", "performance measurement (takes minutes)")
	requireFUSE(t)
	const sysctl = "/proc/sys/fs/fuse/default_request_timeout"
	old, err := os.ReadFile(sysctl)
	if err != nil {
		testenv.Missingf(t, "the kernel has no FUSE request timeouts: %v", err)
	}
	t.Cleanup(func() { os.WriteFile(sysctl, old, 0) })
	libfuse, err := images.BuildPassthroughLL(context.Background(), t.TempDir(), nil)
	if err != nil {
		testenv.Missingf(t, "cannot build libfuse's passthrough_ll: %v", err)
	}
	secs, rounds := 5.0, 5
	if v, err := strconv.ParseFloat(os.Getenv("KLAB_FUSE_PERF_SECONDS"), 64); err == nil && v > 0 {
		secs = v
	}
	if v, err := strconv.Atoi(os.Getenv("KLAB_FUSE_PERF_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	servers := perfServers(libfuse)
	servers = []perfServer{servers[2], servers[3]}
	res := map[string][]float64{}
	for r := 0; r < rounds; r++ {
		for _, s := range servers {
			for _, timeout := range []string{"0", "500"} {
				if err := os.WriteFile(sysctl, []byte(timeout), 0); err != nil {
					t.Fatal(err)
				}
				var v float64
				err := withServer(perfDir(t), s.cfg, func(mnt string) error {
					os.WriteFile(sysctl, []byte("0"), 0) // fixed at INIT
					var err error
					v, err = runClient("seqwrite", mnt, "4", "1024", strconv.FormatFloat(secs, 'f', -1, 64))
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				k := s.name + "/timeout=" + timeout
				res[k] = append(res[k], v/(1<<20))
			}
		}
	}
	var b strings.Builder
	for _, s := range servers {
		off, on := median(res[s.name+"/timeout=0"]), median(res[s.name+"/timeout=500"])
		fmt.Fprintf(&b, "\n%-12s off %8.1f MiB/s  on %8.1f MiB/s  cost %+.1f%%", s.name, off, on, (on/off-1)*100)
	}
	t.Logf("seqwrite 4x1KiB, medians of %d rounds of %.0fs on %d CPUs:%s", rounds, secs, numCPU(), b.String())
}

// perfDir returns a scratch directory for one measurement: under
// $KLAB_FUSE_PERF_DIR when set (e.g. /dev/shm, so that the backing file
// system is tmpfs as in the guest), else under t.TempDir().
func perfDir(t *testing.T) string {
	base := os.Getenv("KLAB_FUSE_PERF_DIR")
	if base == "" {
		return t.TempDir()
	}
	d, err := os.MkdirTemp(base, "klab-fuse-perf-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func numCPU() int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) == nil {
		return set.Count()
	}
	return 0
}

// BenchmarkSeqWrite1K is the seed's job a) against klab's passthrough:
// b.N 1 KiB writes spread over 4 jobs.
func BenchmarkSeqWrite1K(b *testing.B) {
	for _, threads := range []int{1, 4} {
		b.Run(fmt.Sprintf("klab-t%d", threads), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Threads = threads
			s := mount(b, cfg)
			b.SetBytes(1024)
			var wg sync.WaitGroup
			per := b.N/4 + 1
			b.ResetTimer()
			for j := 0; j < 4; j++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					fd, err := unix.Open(filepath.Join(s.Mountpoint(), "f"+strconv.Itoa(j)), unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, 0o644)
					if err != nil {
						b.Error(err)
						return
					}
					defer unix.Close(fd)
					buf := make([]byte, 1024)
					for i := 0; i < per; i++ {
						if _, err := unix.Write(fd, buf); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
