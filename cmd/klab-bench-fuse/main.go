// Command klab-bench-fuse measures FUSE servers on this host (as root):
// klab's passthrough server over /dev/fuse against FUSE-over-io_uring, and
// libfuse's passthrough_hp over both, side by side, in the shape of the
// tables of the FUSE-over-io_uring series' cover letter (seed 003): paged
// reads at 128K and 1M, O_DIRECT reads at 1M and mmap reads at 4K (MB/s),
// and creates/s, each at several job counts, with a gain column (uring
// over /dev/fuse). `make bench-fuse` runs it after the guest part, which
// is the experiment experiments/fuse-uring.yaml run by `klab run`.
//
// The servers run in this process (libfuse's as a child), and the Go
// engine in a child process (this binary re-executed), so that the client
// and the server do not share a Go runtime.
//
// Every cell (workload, jobs, server, transport, round) gets a fresh mount,
// and the two transports alternate cell by cell (ABBA across rounds), so
// that drift and noise hit both alike; the tables give the medians.
//
// Every byte counted crossed the FUSE transport:
//
//   - the read files are sparse files far larger than a cell can read,
//     and each job reads its file at most once (size-based runs bounded
//     by --seconds), so nothing is read twice;
//   - every cell mounts afresh, caches are dropped before it
//     (/proc/sys/vm/drop_caches), and the engine drops the file's pages
//     when it opens it (POSIX_FADV_DONTNEED);
//   - the server's own reads are counted (rchar of /proc/PID/io: the
//     passthrough server preads every byte it serves from the backing
//     file, or splices it, which klab's server counts), and a cell whose
//     server read less than 90% of the bytes the client counted is
//     flagged as served from a cache. Over io_uring the ring's request
//     counter must be non-zero too. libfuse over /dev/fuse splices its
//     replies, which rchar does not see and libfuse does not count:
//     those cells are only flagged when the ratio is low and marked
//     unverified.
//
// Seed 000's job (1 KiB sequential writes, 4 jobs) runs too, against
// libfuse 3.14's passthrough_ll over /dev/fuse as the seed measured it,
// and against passthrough_hp over io_uring.
//
// Next to the throughput, every cell records the server's CPU time per
// request: the server process's CPU time over the requests the kernel
// ended on its connection (cpu.go), so that klab's servers and libfuse's
// are counted alike. A last table puts klab against libfuse: the ratio of
// the medians, the range of the per-round ratios, and the CPU per request.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/fuse"
	"klab/guest/fuse/devfuse"
	"klab/guest/proto"
	"klab/guest/workload"
	"klab/images"
	"klab/images/build"
	"klab/internal/paths"
	"klab/internal/units"
	"klab/results"
	"klab/results/stats"
)

// clientEnv makes this binary the load generator: it reads a
// proto.WorkloadStep as JSON on stdin, runs it with the Go engine and
// writes a clientResult as JSON on stdout.
const clientEnv = "KLAB_BENCH_FUSE_CLIENT"

const usageText = `klab-bench-fuse: FUSE servers on this host (as root), klab's passthrough
server and libfuse's passthrough_hp, each over /dev/fuse and over
FUSE-over-io_uring, in the shape of the FUSE-over-io_uring cover letter's
tables (paged reads 128K/1M, O_DIRECT reads 1M, mmap reads 4K in MB/s,
creates/s), with a gain column (uring over /dev/fuse). The same tables in a
guest are an experiment: klab run fuse-uring --kernel debian:7.3.

The servers run in this process, the Go workload engine in a child
process. Each cell gets a fresh mount; /dev/fuse and io_uring alternate
cell by cell for --rounds rounds; tables show the medians. Raw samples go
to a JSON file under a new run directory, or to --json.

Examples:
  klab-bench-fuse                                   # 2 rounds of 3 s cells
  klab-bench-fuse --rounds 3 --seconds 5
  klab-bench-fuse --jobs 1,2 --workloads paged-1m,creates
  klab-bench-fuse --libfuse-hp none                 # klab only, no libfuse build
  make bench-fuse BENCH_FUSE_FLAGS='--rounds 3'

Workloads: paged-128k, paged-1m (sequential buffered reads), dio-1m
(sequential O_DIRECT reads), mmap-4k (sequential 4 KiB copies from a
mapping), creates (open O_CREAT of new empty files, one directory per job).

Flags:
`

// options are the command's flags.
type options struct {
	where       string
	seconds     float64
	rounds      int
	jobs        []int
	workloads   []wdef
	jsonPath    string
	libfuseHP   string
	libfuseLL   string
	klabBin     string
	libfuseArgs []string
	hostSize    int64
	devThreads  int
	queueDepth  int
	hostCreates int
	dropCaches  bool
	noCache     bool
	cacheDir    string
	runsDir     string
	verbose     bool
	fromJSON    string
}

func main() {
	if os.Getenv(clientEnv) != "" {
		os.Exit(clientMain())
	}
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "klab-bench-fuse:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "klab-bench-fuse:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("klab-bench-fuse", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	fs.Float64Var(&o.seconds, "seconds", 3, "measured seconds per cell (a cell may end sooner when its data or creates run out)")
	fs.IntVar(&o.rounds, "rounds", 2, "rounds; each runs every cell over both transports, alternating which goes first")
	jobs := fs.String("jobs", "1,2,4", "comma-separated job counts")
	wl := fs.String("workloads", "paged-128k,paged-1m,dio-1m,mmap-4k,creates,write-1k", "comma-separated workloads")
	fs.StringVar(&o.jsonPath, "json", "", "write the raw samples here (default: bench-fuse.json in a new run directory under --runs-dir)")
	fs.StringVar(&o.libfuseHP, "libfuse-hp", "auto", "libfuse's passthrough_hp binary to measure on the host with and without io_uring; auto: build libfuse 3.18 from Debian sid's source into the cache (skipped with a note when that fails); none: klab only")
	fs.StringVar(&o.libfuseLL, "libfuse-ll", "auto", "libfuse's passthrough_ll binary, the /dev/fuse reference of seed 000's write job; auto: build the host's libfuse example (libfuse3-dev) into the cache; none: no passthrough_ll")
	fs.StringVar(&o.klabBin, "klab-bin", "", "run klab's server as `BIN` fuse serve (BIN: a klab binary) in a process of its own, as libfuse's servers run (default: in this process)")
	hpArgs := fs.String("libfuse-hp-args", "", "extra passthrough_hp arguments, space-separated (e.g. --nosplice)")
	hostSize := fs.String("host-size", "64G", "size of each job's sparse read file on the host")
	fs.IntVar(&o.devThreads, "dev-threads", 0, "klab's /dev/fuse worker threads and passthrough_ll's max_threads (0: the largest job count of the workloads)")
	fs.IntVar(&o.queueDepth, "queue-depth", 8, "klab's io_uring entries per queue (and passthrough_hp's io_uring_q_depth)")
	fs.IntVar(&o.hostCreates, "host-creates", 200000, "most files one create cell makes on the host, over all jobs")
	fs.BoolVar(&o.dropCaches, "drop-caches", true, "write 3 to /proc/sys/vm/drop_caches before every cell")
	fs.BoolVar(&o.noCache, "nocache", false, "no attribute or entry cache on either side (klab's timeouts 0, passthrough_hp --nocache), so that both servers answer the same requests, as experiments/fuse-bench-hp.yaml does; by default each keeps its own caching")
	fs.StringVar(&o.cacheDir, "cache-dir", paths.CacheDir(), "klab's cache directory")
	fs.StringVar(&o.runsDir, "runs-dir", paths.RunsDir(), "where runs are saved")
	fs.StringVar(&o.fromJSON, "from-json", "", "print the tables of an earlier run's JSON file and exit")
	fs.BoolVar(&o.verbose, "v", false, "print guest output, agent logs and samples as they come")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	var errs []error
	o.where = "host"
	if o.seconds < 0.5 || o.seconds > 600 {
		errs = append(errs, fmt.Errorf("--seconds %v: want 0.5..600", o.seconds))
	}
	if o.rounds < 1 || o.rounds > 100 {
		errs = append(errs, fmt.Errorf("--rounds %d: want 1..100", o.rounds))
	}
	var err error
	if o.jobs, err = parseJobs(*jobs); err != nil {
		errs = append(errs, err)
	}
	if o.workloads, err = parseWorkloads(*wl); err != nil {
		errs = append(errs, err)
	}
	if o.hostSize, err = build.ParseSize(*hostSize); err != nil {
		errs = append(errs, fmt.Errorf("--host-size: %w", err))
	}
	for _, s := range []int64{o.hostSize} {
		if s != 0 && (s < 1<<20 || s > workload.MaxFileSize) {
			errs = append(errs, fmt.Errorf("read file size %s: want 1M..1T", workload.FormatSize(s)))
		}
	}
	if o.queueDepth < 1 || o.queueDepth > 1024 {
		errs = append(errs, fmt.Errorf("--queue-depth %d: want 1..1024", o.queueDepth))
	}
	if o.devThreads < 0 || o.devThreads > 1024 {
		errs = append(errs, fmt.Errorf("--dev-threads %d: want 0..1024", o.devThreads))
	}
	if o.hostCreates < 1 {
		errs = append(errs, errors.New("--host-creates must be positive"))
	}
	if o.libfuseHP == "none" {
		o.libfuseHP = ""
	}
	if o.libfuseLL == "none" {
		o.libfuseLL = ""
	}
	for _, b := range []struct{ flag, path string }{{"--libfuse-hp", o.libfuseHP}, {"--libfuse-ll", o.libfuseLL}, {"--klab-bin", o.klabBin}} {
		if b.path == "" || b.path == "auto" {
			continue
		}
		if fi, err := os.Stat(b.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b.flag, err))
		} else if fi.IsDir() || fi.Mode()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("%s %s: not an executable file", b.flag, b.path))
		}
	}
	o.libfuseArgs = strings.Fields(*hpArgs)
	if o.noCache && !slices.Contains(o.libfuseArgs, "--nocache") {
		o.libfuseArgs = append(o.libfuseArgs, "--nocache")
	}
	if o.devThreads == 0 {
		// The largest job count of any workload (seed 000 ran 4 jobs on 4
		// server threads).
		for _, w := range o.workloads {
			if js := w.jobsFor(o.jobs); len(js) > 0 {
				o.devThreads = max(o.devThreads, slices.Max(js))
			}
		}
	}
	return o, errors.Join(errs...)
}

// parseJobs parses "1,2,4".
func parseJobs(s string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 256 {
			return nil, fmt.Errorf("--jobs: %q is not a job count 1..256", f)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--jobs: no job count")
	}
	sort.Ints(out)
	return out, nil
}

// wdef is one workload of the tables.
type wdef struct {
	// Key names it on the command line and in the JSON.
	Key string `json:"key"`
	// Table is the title of the table it is in; Group its column group
	// there (the paged reads table has two, as the seed's).
	Table string `json:"table"`
	Group string `json:"group,omitempty"`
	// Pattern and BS are the Go engine's.
	Pattern proto.Pattern `json:"pattern"`
	BS      int64         `json:"bs,omitempty"`
	// Unit is what the tables show: MB/s (10^6 bytes) or creates/s.
	Unit string `json:"unit"`
	// Jobs, when set, are the job counts this workload runs at instead
	// of --jobs (a seed's fixed shape).
	Jobs []int `json:"jobs,omitempty"`
	// LL says that libfuse's reference over /dev/fuse is passthrough_ll
	// (as the seed measured it), not passthrough_hp.
	LL bool `json:"ll,omitempty"`
}

// isWrite reports whether w writes (to a fresh backing directory).
func (w wdef) isWrite() bool { return w.Pattern == proto.PatternSeqWrite }

// jobsFor returns the job counts w runs at.
func (w wdef) jobsFor(jobs []int) []int {
	if w.Jobs != nil {
		return w.Jobs
	}
	return jobs
}

// isCreate reports whether w counts creates rather than bytes.
func (w wdef) isCreate() bool { return w.Pattern == proto.PatternCreate }

// clientReads reports whether the client's own read(2) calls move the
// bytes (and so show up in its rchar), as opposed to mmap copies.
func (w wdef) clientReads() bool {
	return w.Pattern == proto.PatternSeqRead || w.Pattern == proto.PatternDirectSeqRead
}

var allWorkloads = []wdef{
	{Key: "paged-128k", Table: "paged reads", Group: "128K IO size", Pattern: proto.PatternSeqRead, BS: 128 << 10, Unit: "MB/s"},
	{Key: "paged-1m", Table: "paged reads", Group: "1024K IO size", Pattern: proto.PatternSeqRead, BS: 1 << 20, Unit: "MB/s"},
	{Key: "dio-1m", Table: "dio reads (1024K)", Pattern: proto.PatternDirectSeqRead, BS: 1 << 20, Unit: "MB/s"},
	{Key: "mmap-4k", Table: "mmap reads (4K)", Pattern: proto.PatternMmapSeqRead, BS: 4 << 10, Unit: "MB/s"},
	{Key: "creates", Table: "creates/s", Pattern: proto.PatternCreate, Unit: "creates/s"},
	// Seed 000: fio --rw=write --bs=1k --numjobs=4 on passthrough_ll -o
	// max_threads=4, tmpfs backing.
	{Key: "write-1k", Table: "sequential writes (1K, seed 000)", Pattern: proto.PatternSeqWrite, BS: 1 << 10, Unit: "MB/s", Jobs: []int{4}, LL: true},
}

func parseWorkloads(s string) ([]wdef, error) {
	want := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			want[f] = true
		}
	}
	var out []wdef
	for _, w := range allWorkloads {
		if want[w.Key] {
			out = append(out, w)
			delete(want, w.Key)
		}
	}
	if len(want) > 0 {
		var bad, keys []string
		for k := range want {
			bad = append(bad, k)
		}
		for _, w := range allWorkloads {
			keys = append(keys, w.Key)
		}
		sort.Strings(bad)
		return nil, fmt.Errorf("--workloads: unknown %s, want some of %s", strings.Join(bad, ", "), strings.Join(keys, ","))
	}
	if len(out) == 0 {
		return nil, errors.New("--workloads: none given")
	}
	return out, nil
}

// Servers and transports of the variants.
const (
	serverKlab    = "klab"
	serverLibfuse = "libfuse-hp"
	serverLL      = "libfuse-ll"
	transportDev  = fuse.TransportDev
	transportRing = fuse.TransportURing
)

// variant is one server over one transport.
type variant struct {
	Server    string `json:"server"`
	Transport string `json:"transport"`
}

func (v variant) String() string { return v.Server + "/" + v.Transport }

// planned is one cell to measure.
type planned struct {
	W     wdef
	Jobs  int
	Round int
	V     variant
}

// makePlan orders the cells: round by round, workload by workload, job
// count by job count, every variant in turn; odd rounds run the variants
// in reverse (ABBA), so that neither transport always goes first.
// Variants of the passthrough_ll server run only for workloads whose
// reference it is.
func makePlan(ws []wdef, jobs []int, rounds int, all []variant) []planned {
	var p []planned
	for r := 0; r < rounds; r++ {
		for _, w := range ws {
			var vs []variant
			for _, v := range all {
				if v.Server != serverLL || w.LL {
					vs = append(vs, v)
				}
			}
			for _, j := range w.jobsFor(jobs) {
				for i := range vs {
					v := vs[i]
					if r%2 == 1 {
						v = vs[len(vs)-1-i]
					}
					p = append(p, planned{W: w, Jobs: j, Round: r, V: v})
				}
			}
		}
	}
	return p
}

// Cell is one measured cell: the raw sample the JSON file keeps.
type Cell struct {
	Where     string `json:"where"`
	Seq       int    `json:"seq"`
	Server    string `json:"server"`
	Transport string `json:"transport"`
	Workload  string `json:"workload"`
	Pattern   string `json:"pattern"`
	BS        int64  `json:"bs,omitempty"`
	Jobs      int    `json:"jobs"`
	Round     int    `json:"round"`
	// Engine is the client: go (klab's workload engine) or fio.
	Engine string `json:"engine"`
	// Value is what the tables show, in Unit.
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Metrics are the engine's final numbers.
	Metrics *proto.Metrics `json:"metrics,omitempty"`
	// Samples are its per-interval numbers.
	Samples []proto.Sample `json:"samples,omitempty"`
	// ServerRchar is how many bytes the server process read while the
	// cell ran (rchar of /proc/PID/io), ServedBytes the part that is the
	// server's (in the guest the client shares the process), and
	// ServedRatio ServedBytes over the bytes the client counted.
	ServerRchar int64   `json:"server_rchar,omitempty"`
	ServedBytes int64   `json:"served_bytes,omitempty"`
	ServedRatio float64 `json:"served_ratio,omitempty"`
	// RingRequests are the requests klab's server took over io_uring.
	RingRequests uint64 `json:"ring_requests,omitempty"`
	// SplicedBytes are the bytes klab's server spliced from backing
	// files to /dev/fuse: served, but not in its rchar.
	SplicedBytes int64 `json:"spliced_bytes,omitempty"`
	// FUSEStats are klab's server's counters after the cell.
	FUSEStats json.RawMessage `json:"fuse_stats,omitempty"`
	// ServerCPUNs is the server process's CPU time while the client ran,
	// Requests the requests the kernel ended on the connection in that
	// time, and CPUPerReqUs the first over the second in microseconds
	// (see cpu.go); CostError says why they are missing.
	ServerCPUNs int64   `json:"server_cpu_ns,omitempty"`
	Requests    uint64  `json:"requests,omitempty"`
	CPUPerReqUs float64 `json:"cpu_per_req_us,omitempty"`
	CostError   string  `json:"cost_error,omitempty"`
	// Check is "ok", "cached" (the server did not serve the bytes),
	// "unverified" (no counter could tell) or "" (not applicable).
	Check   string `json:"check,omitempty"`
	Warning string `json:"warning,omitempty"`
	Error   string `json:"error,omitempty"`
	// Start and WallMs are when the cell started and how long it took,
	// mount and teardown included.
	Start  time.Time `json:"start"`
	WallMs int64     `json:"wall_ms"`
}

func (c *Cell) key() cellKey {
	return cellKey{c.Where, c.Server, c.Transport, c.Workload, c.Jobs}
}

type cellKey struct {
	where, server, transport, workload string
	jobs                               int
}

func newCell(where string, seq int, p planned) Cell {
	return Cell{Where: where, Seq: seq, Server: p.V.Server, Transport: p.V.Transport, Workload: p.W.Key,
		Pattern: string(p.W.Pattern), BS: p.W.BS, Jobs: p.Jobs, Round: p.Round, Unit: p.W.Unit, Engine: string(proto.EngineGo)}
}

// finish fills Value and the checks from the metrics and counters.
// clientInRchar says the client's reads count in ServerRchar (the guest's
// agent is client and server in one process).
func (c *Cell) finish(w wdef, clientInRchar bool, haveRchar bool) {
	m := c.Metrics
	if m == nil {
		return
	}
	if w.isCreate() {
		c.Value = m.OpsPerSec
	} else {
		c.Value = m.BytesPerSec / 1e6
	}
	if m.Ops == 0 && c.Error == "" {
		c.Error = "no operation completed"
	}
	if w.isWrite() {
		// Nothing to verify: every write reaches the server without the
		// writeback cache, which no server here uses.
		return
	}
	if c.Transport == transportRing && c.Server == serverKlab && c.RingRequests == 0 && c.Error == "" {
		c.Check = "cached"
		c.Warning = "no request went over io_uring"
		return
	}
	if w.isCreate() || !haveRchar {
		// A create always reaches the server; over io_uring its ring
		// shows it.
		if w.isCreate() && c.Transport == transportRing && c.Server == serverKlab {
			c.Check = "ok"
			if c.RingRequests < uint64(m.Ops) {
				c.Check = "cached"
				c.Warning = fmt.Sprintf("%d creates but only %d io_uring requests", m.Ops, c.RingRequests)
			}
		}
		return
	}
	served := c.ServerRchar + c.SplicedBytes
	if clientInRchar && w.clientReads() {
		served -= m.Bytes
	}
	c.ServedBytes = served
	if m.Bytes > 0 {
		c.ServedRatio = float64(served) / float64(m.Bytes)
	}
	c.Check = servedCheck(c.ServedRatio, c.Server == serverLibfuse && c.Transport == transportDev)
	switch c.Check {
	case "cached":
		c.Warning = fmt.Sprintf("the server read %s of the %s the client counted (%.0f%%): served from a cache",
			units.Bytes(served), units.Bytes(m.Bytes), 100*c.ServedRatio)
	case "unverified":
		c.Warning = fmt.Sprintf("server rchar %.0f%% of the client's bytes; libfuse splices its /dev/fuse replies, which rchar does not count", 100*c.ServedRatio)
	}
}

// servedCheck judges the ratio of the bytes the server read to those the
// client counted. Splicing servers cannot be judged by it.
func servedCheck(ratio float64, splices bool) string {
	switch {
	case ratio >= 0.9:
		return "ok"
	case splices:
		return "unverified"
	default:
		return "cached"
	}
}

// stepFor returns the workload step of one cell, against dir.
func stepFor(w wdef, jobs int, dir string, seconds float64, size int64, maxCreates int) proto.WorkloadStep {
	s := proto.WorkloadStep{
		Pattern:   w.Pattern,
		Dir:       dir,
		Jobs:      jobs,
		RuntimeMs: int64(seconds * 1000),
		SampleMs:  500,
	}
	if w.isCreate() {
		s.Name = "cr"
		s.Files = max(1, maxCreates/jobs)
		return s
	}
	if w.isWrite() {
		// The seed's --size=1G per job, bounded by the cell's time.
		s.Name = "wr"
		s.BlockSize = w.BS
		s.FileSize = 1 << 30
		return s
	}
	// Every read workload reads the same sparse files, rd.<job>.0, laid
	// out before the first cell; each job reads its file at most once.
	s.Name = "rd"
	s.BlockSize = w.BS
	s.FileSize = size
	return s
}

// progress prints progress lines on stderr, with elapsed time and an
// estimate of what is left.
type progress struct {
	mu    sync.Mutex
	where string
	total int
	start time.Time
}

func (p *progress) line(done int, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	el := time.Since(p.start)
	eta := ""
	if done > 0 && done < p.total {
		left := time.Duration(float64(el) / float64(done) * float64(p.total-done))
		eta = ", ~" + fmtDur(left) + " left"
	}
	fmt.Fprintf(os.Stderr, "[%s %d/%d %s%s] %s\n", p.where, done, p.total, fmtDur(el), eta, fmt.Sprintf(format, args...))
}

func fmtDur(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// Report is the JSON file.
type Report struct {
	Started  time.Time      `json:"started"`
	Finished time.Time      `json:"finished"`
	Command  []string       `json:"command"`
	Options  map[string]any `json:"options"`
	Host     *PartInfo      `json:"host,omitempty"`
	Guest    *PartInfo      `json:"guest,omitempty"`
	Cells    []Cell         `json:"cells"`
	Medians  []Median       `json:"medians"`
}

// PartInfo describes where one part ran.
type PartInfo struct {
	Kernel   string        `json:"kernel"`
	CPUs     int           `json:"cpus"`
	CPUModel string        `json:"cpu_model,omitempty"`
	MemMiB   int           `json:"mem_mib,omitempty"`
	Accel    string        `json:"accel,omitempty"`
	RunDir   string        `json:"run_dir,omitempty"`
	Backing  string        `json:"backing"`
	Wall     time.Duration `json:"wall_ns"`
	Note     string        `json:"note,omitempty"`
	Error    string        `json:"error,omitempty"`
	// Queues is the number of io_uring queues (possible CPUs).
	Queues int `json:"queues,omitempty"`
}

// Median is one table entry.
type Median struct {
	Where     string    `json:"where"`
	Server    string    `json:"server"`
	Transport string    `json:"transport"`
	Workload  string    `json:"workload"`
	Jobs      int       `json:"jobs"`
	Unit      string    `json:"unit"`
	Median    float64   `json:"median"`
	Values    []float64 `json:"values"`
	Flag      string    `json:"flag,omitempty"`
	// CPUPerReqUs is the median of the cells' server CPU per request.
	CPUPerReqUs float64 `json:"cpu_per_req_us,omitempty"`
}

func run(ctx context.Context, o options) error {
	if o.fromJSON != "" {
		b, err := os.ReadFile(o.fromJSON)
		if err != nil {
			return err
		}
		var rep Report
		if err := json.Unmarshal(b, &rep); err != nil {
			return fmt.Errorf("%s: %w", o.fromJSON, err)
		}
		printReport(&rep, o, o.fromJSON)
		return nil
	}
	if o.libfuseHP == "auto" {
		o.libfuseHP = ""
		if os.Geteuid() != 0 {
			fmt.Fprintln(os.Stderr, "klab-bench-fuse: not root: no host part, so libfuse's passthrough_hp is not built")
		} else if p, v, err := images.BuildPassthroughHP(ctx, images.PassthroughHPOptions{DebianOptions: images.DebianOptions{CacheDir: o.cacheDir, Progress: os.Stderr}}); err != nil {
			fmt.Fprintf(os.Stderr, "klab-bench-fuse: libfuse's passthrough_hp is not available, measuring klab only: %v\n", err)
		} else {
			fmt.Fprintf(os.Stderr, "klab-bench-fuse: libfuse %s passthrough_hp: %s\n", v, p)
			o.libfuseHP = p
		}
	}
	if o.libfuseLL == "auto" {
		o.libfuseLL = ""
		needLL := slices.ContainsFunc(o.workloads, func(w wdef) bool { return w.LL })
		if needLL && os.Geteuid() == 0 {
			if p, err := images.BuildPassthroughLL(ctx, o.cacheDir, os.Stderr); err != nil {
				fmt.Fprintf(os.Stderr, "klab-bench-fuse: libfuse's passthrough_ll is not available: %v\n", err)
			} else {
				fmt.Fprintf(os.Stderr, "klab-bench-fuse: libfuse passthrough_ll: %s\n", p)
				o.libfuseLL = p
			}
		}
	}
	start := time.Now()
	rep := &Report{Started: start, Command: os.Args, Options: map[string]any{
		"libfuse_ll": o.libfuseLL, "klab_bin": o.klabBin,
		"where": o.where, "seconds": o.seconds, "rounds": o.rounds, "jobs": o.jobs,
		"workloads": workloadKeys(o.workloads), "host_size": o.hostSize, "dev_threads": o.devThreads,
		"queue_depth": o.queueDepth, "libfuse_hp": o.libfuseHP,
		"libfuse_hp_args": o.libfuseArgs, "drop_caches": o.dropCaches, "nocache": o.noCache,
		"host_creates": o.hostCreates,
	}}
	jsonPath := o.jsonPath
	if jsonPath == "" {
		r, err := (results.Store{Root: o.runsDir}).Create("bench-fuse")
		if err != nil {
			return err
		}
		jsonPath = filepath.Join(r.Dir, "bench-fuse.json")
	}
	save := func() error {
		rep.Finished = time.Now()
		rep.Medians = medians(rep.Cells)
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(jsonPath), 0o755); err != nil {
			return err
		}
		return results.WriteFileAtomic(jsonPath, append(b, '\n'), 0o644)
	}

	var errs []error
	if ctx.Err() == nil {
		if os.Geteuid() != 0 {
			msg := "the host part needs root (it mounts FUSE and sets fuse's enable_uring); skipped"
			fmt.Fprintln(os.Stderr, "klab-bench-fuse: "+msg)
			rep.Host = &PartInfo{Error: msg}
			errs = append(errs, errors.New(msg))
		} else {
			cells, info, err := runHost(ctx, o)
			rep.Cells = append(rep.Cells, cells...)
			rep.Host = info
			if err != nil {
				errs = append(errs, fmt.Errorf("host: %w", err))
				if info != nil {
					info.Error = err.Error()
				}
			}
		}
	}
	if err := save(); err != nil {
		errs = append(errs, err)
	}

	printReport(rep, o, "")
	fmt.Printf("\nraw samples: %s\n", jsonPath)
	return errors.Join(errs...)
}

// printReport prints the tables of every part of rep. The workloads and
// job counts come from rep's cells when from names the file they were read
// from.
func printReport(rep *Report, o options, from string) {
	ws, jobs := o.workloads, o.jobs
	if from != "" {
		ws, jobs = nil, nil
		for _, w := range allWorkloads {
			for _, c := range rep.Cells {
				if c.Workload == w.Key {
					ws = append(ws, w)
					break
				}
			}
		}
		for _, c := range rep.Cells {
			if !slices.Contains(jobs, c.Jobs) {
				jobs = append(jobs, c.Jobs)
			}
		}
		slices.Sort(jobs)
		if v, ok := rep.Options["dev_threads"].(float64); ok {
			o.devThreads = int(v)
		}
		if v, ok := rep.Options["queue_depth"].(float64); ok {
			o.queueDepth = int(v)
		}
		if v, ok := rep.Options["rounds"].(float64); ok {
			o.rounds = int(v)
		}
		if v, ok := rep.Options["seconds"].(float64); ok {
			o.seconds = v
		}
	}
	fmt.Printf("klab bench-fuse, %s: klab's passthrough server over /dev/fuse against io_uring, medians of %d round(s) of %gs cells\n",
		rep.Started.UTC().Format(time.RFC3339), o.rounds, o.seconds)
	for _, part := range []struct {
		where string
		info  *PartInfo
	}{{"guest", rep.Guest}, {"host", rep.Host}} {
		if part.info == nil {
			continue
		}
		fmt.Println()
		fmt.Print(partHeader(part.where, part.info, o))
		var cells []Cell
		for _, c := range rep.Cells {
			if c.Where == part.where {
				cells = append(cells, c)
			}
		}
		if len(cells) == 0 {
			continue
		}
		fmt.Print(renderPart(part.where, cells, ws, jobs))
	}
}

func workloadKeys(ws []wdef) []string {
	var k []string
	for _, w := range ws {
		k = append(k, w.Key)
	}
	return k
}

func partHeader(where string, in *PartInfo, o options) string {
	var b strings.Builder
	title := where
	if where == "guest" {
		title = "guest (" + in.Kernel + " under " + in.Accel + ")"
	}
	fmt.Fprintf(&b, "== %s ==\n", title)
	if in.Kernel != "" {
		fmt.Fprintf(&b, "kernel %s, %d CPUs", in.Kernel, in.CPUs)
		if in.CPUModel != "" {
			fmt.Fprintf(&b, " (%s)", in.CPUModel)
		}
		if in.MemMiB > 0 {
			fmt.Fprintf(&b, ", %d MiB", in.MemMiB)
		}
		fmt.Fprintf(&b, ", backing %s; took %s\n", in.Backing, fmtDur(in.Wall))
		fmt.Fprintf(&b, "klab passthrough: /dev/fuse with %d worker threads; io_uring with %d queue(s) of depth %d, one ring thread per queue\n",
			o.devThreads, in.Queues, o.queueDepth)
		if o.noCache {
			fmt.Fprintln(&b, "caches: none on either side (--nocache)")
		}
	}
	if in.Note != "" {
		fmt.Fprintln(&b, in.Note)
	}
	if in.RunDir != "" {
		fmt.Fprintf(&b, "run: %s\n", in.RunDir)
	}
	if in.Error != "" {
		// Only the first line: a kernel error goes on with console lines,
		// which the run directory keeps.
		fmt.Fprintf(&b, "ERROR: %s\n", strings.SplitN(in.Error, "\n", 2)[0])
	}
	return b.String()
}

// medians groups successful cells by key.
func medians(cells []Cell) []Median {
	idx := map[cellKey]int{}
	cpu := map[cellKey][]float64{}
	var out []Median
	for _, c := range cells {
		k := c.key()
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Median{Where: c.Where, Server: c.Server, Transport: c.Transport, Workload: c.Workload, Jobs: c.Jobs, Unit: c.Unit})
		}
		m := &out[i]
		switch {
		case c.Error != "":
			if m.Flag == "" || m.Flag == "*" || m.Flag == "?" {
				m.Flag = "!"
			}
			continue
		case c.Check == "cached":
			if m.Flag == "" || m.Flag == "?" {
				m.Flag = "*"
			}
		case c.Check == "unverified":
			if m.Flag == "" {
				m.Flag = "?"
			}
		}
		m.Values = append(m.Values, c.Value)
		if c.CPUPerReqUs > 0 {
			cpu[k] = append(cpu[k], c.CPUPerReqUs)
		}
	}
	for i := range out {
		out[i].Median = stats.Median(out[i].Values)
		m := &out[i]
		if v := cpu[cellKey{m.Where, m.Server, m.Transport, m.Workload, m.Jobs}]; len(v) > 0 {
			m.CPUPerReqUs = stats.Median(v)
		}
	}
	return out
}

// renderPart prints the tables of one part, and the cells' problems.
func renderPart(where string, cells []Cell, ws []wdef, jobs []int) string {
	ms := medians(cells)
	fio := map[string]bool{} // workloads some cell ran with fio
	for _, c := range cells {
		if c.Engine == string(proto.EngineFio) {
			fio[c.Workload] = true
		}
	}
	get := map[cellKey]Median{}
	servers := map[string]bool{}
	for _, m := range ms {
		get[cellKey{m.Where, m.Server, m.Transport, m.Workload, m.Jobs}] = m
		servers[m.Server] = true
	}
	var b strings.Builder
	// Tables in workload order; a table's groups in order too.
	var tables []string
	groups := map[string][]wdef{}
	for _, w := range ws {
		if _, ok := groups[w.Table]; !ok {
			tables = append(tables, w.Table)
		}
		groups[w.Table] = append(groups[w.Table], w)
	}
	for _, t := range tables {
		tb := table{Title: t, First: "jobs"}
		if groups[t][0].isCreate() {
			tb.First = "threads"
		} else {
			tb.Title += ", " + groups[t][0].Unit
		}
		for _, w := range groups[t] {
			if fio[w.Key] && !strings.Contains(tb.Title, "[fio client]") {
				tb.Title += " [fio client]"
			}
			g := tgroup{Label: w.Group}
			g.Cols = []string{"/dev/fuse", "uring", "gain"}
			if servers[serverLibfuse] {
				g.Cols = append(g.Cols, "hp /dev/fuse", "hp uring", "hp gain")
			}
			if w.LL && servers[serverLL] {
				g.Cols = append(g.Cols, "ll /dev/fuse")
			}
			tb.Groups = append(tb.Groups, g)
		}
		for _, j := range groups[t][0].jobsFor(jobs) {
			r := trow{Label: strconv.Itoa(j)}
			for _, w := range groups[t] {
				svs := []string{serverKlab}
				if servers[serverLibfuse] {
					svs = append(svs, serverLibfuse)
				}
				for _, sv := range svs {
					d, okd := get[cellKey{where, sv, transportDev, w.Key, j}]
					u, oku := get[cellKey{where, sv, transportRing, w.Key, j}]
					r.Cells = append(r.Cells, fmtVal(d, okd), fmtVal(u, oku), fmtGain(d, okd, u, oku))
				}
				if w.LL && servers[serverLL] {
					d, okd := get[cellKey{where, serverLL, transportDev, w.Key, j}]
					r.Cells = append(r.Cells, fmtVal(d, okd))
				}
			}
			tb.Rows = append(tb.Rows, r)
		}
		b.WriteString("\n")
		b.WriteString(tb.render())
	}
	if servers[serverLibfuse] || servers[serverLL] {
		b.WriteString("\n")
		b.WriteString(vsLibfuse(where, cells, ms, ws, jobs).render())
	}
	// Footnotes: every problem, once; unverifiable cells summed up per
	// variant.
	var notes []string
	type unv struct {
		n         int
		workloads []string
		maxRatio  float64
	}
	unverified := map[string]*unv{}
	var unvOrder []string
	for _, c := range cells {
		if c.Error == "" && c.Warning == "" && c.Check != "cached" && c.Check != "unverified" {
			continue
		}
		v := variant{c.Server, c.Transport}.String()
		what := fmt.Sprintf("%s jobs=%d %s round %d", c.Workload, c.Jobs, v, c.Round+1)
		switch {
		case c.Error != "":
			msg, more, _ := strings.Cut(c.Error, "\n")
			if more != "" {
				msg += fmt.Sprintf(" (and %d more lines in the JSON)", strings.Count(more, "\n")+1)
			}
			notes = append(notes, fmt.Sprintf("  ! %s: %s", what, msg))
		case c.Check == "unverified":
			u := unverified[v]
			if u == nil {
				u = &unv{}
				unverified[v] = u
				unvOrder = append(unvOrder, v)
			}
			u.n++
			u.maxRatio = max(u.maxRatio, c.ServedRatio)
			if !slices.Contains(u.workloads, c.Workload) {
				u.workloads = append(u.workloads, c.Workload)
			}
		default:
			mark := "~"
			if c.Check == "cached" {
				mark = "*"
			}
			notes = append(notes, strings.TrimSuffix(fmt.Sprintf("  %s %s: %s", mark, what, c.Warning), ": "))
		}
	}
	for _, v := range unvOrder {
		u := unverified[v]
		notes = append(notes, fmt.Sprintf("  ? %s, %d cells (%s): the server's rchar was at most %.0f%% of the client's bytes; libfuse splices its /dev/fuse replies, which rchar does not count",
			v, u.n, strings.Join(u.workloads, ", "), 100*u.maxRatio))
	}
	if len(notes) > 0 {
		b.WriteString("\n! failed cell (left out of the median), * served from a cache (warning), ? not verifiable by counters, ~ note:\n")
		b.WriteString(strings.Join(notes, "\n") + "\n")
	}
	return b.String()
}

// vsLibfuse is the table of klab against libfuse: per workload and job
// count, over each transport, the ratio of klab's median to libfuse's,
// the lowest and highest ratio of one round's pair of cells, and the
// median server CPU time per request of both. libfuse's reference over
// /dev/fuse is passthrough_ll for the workloads whose seed measured it,
// else passthrough_hp; over io_uring it is passthrough_hp.
func vsLibfuse(where string, cells []Cell, ms []Median, ws []wdef, jobs []int) table {
	get := map[cellKey]Median{}
	for _, m := range ms {
		get[cellKey{m.Where, m.Server, m.Transport, m.Workload, m.Jobs}] = m
	}
	// Per-round values of cells that did not fail.
	type roundKey struct {
		k     cellKey
		round int
	}
	byRound := map[roundKey]float64{}
	for _, c := range cells {
		if c.Error == "" && c.Where == where {
			byRound[roundKey{c.key(), c.Round}] = c.Value
		}
	}
	tb := table{
		Title: "klab against libfuse: throughput ratio (medians; lowest-highest of the rounds' pairs), server CPU per request in us",
		First: "workload jobs",
		Groups: []tgroup{
			{Label: "/dev/fuse", Cols: []string{"ref", "ratio", "rounds", "klab us/req", "ref us/req"}},
			{Label: "io_uring (ref hp)", Cols: []string{"ratio", "rounds", "klab us/req", "hp us/req"}},
		},
	}
	us := func(m Median, ok bool) string {
		if !ok || m.CPUPerReqUs <= 0 {
			return "-"
		}
		return strconv.FormatFloat(m.CPUPerReqUs, 'f', 1, 64)
	}
	compare := func(w wdef, j int, tr, ref string) []string {
		kk := cellKey{where, serverKlab, tr, w.Key, j}
		rk := cellKey{where, ref, tr, w.Key, j}
		km, okk := get[kk]
		rm, okr := get[rk]
		ratio := "-"
		if okk && okr && len(km.Values) > 0 && len(rm.Values) > 0 && rm.Median > 0 {
			ratio = strconv.FormatFloat(km.Median/rm.Median, 'f', 2, 64)
		}
		lo, hi := 0.0, 0.0
		for r := 0; r < 100; r++ {
			a, oka := byRound[roundKey{kk, r}]
			b, okb := byRound[roundKey{rk, r}]
			if !oka || !okb || b <= 0 {
				continue
			}
			x := a / b
			if lo == 0 || x < lo {
				lo = x
			}
			hi = max(hi, x)
		}
		rounds := "-"
		if lo > 0 {
			rounds = fmt.Sprintf("%.2f-%.2f", lo, hi)
		}
		return []string{ratio, rounds, us(km, okk), us(rm, okr)}
	}
	for _, w := range ws {
		devRef, refName := serverLibfuse, "hp"
		if w.LL {
			devRef, refName = serverLL, "ll"
		}
		for _, j := range w.jobsFor(jobs) {
			r := trow{Label: fmt.Sprintf("%s x%d", w.Key, j)}
			r.Cells = append(r.Cells, refName)
			r.Cells = append(r.Cells, compare(w, j, transportDev, devRef)...)
			r.Cells = append(r.Cells, compare(w, j, transportRing, serverLibfuse)...)
			tb.Rows = append(tb.Rows, r)
		}
	}
	return tb
}

func fmtVal(m Median, ok bool) string {
	if !ok {
		return "-"
	}
	if len(m.Values) == 0 {
		return "err" + m.Flag
	}
	return strconv.FormatFloat(m.Median, 'f', 0, 64) + m.Flag
}

func fmtGain(d Median, okd bool, u Median, oku bool) string {
	if !okd || !oku || len(d.Values) == 0 || len(u.Values) == 0 || d.Median <= 0 {
		return "-"
	}
	return strconv.FormatFloat(u.Median/d.Median, 'f', 2, 64)
}

// table is a plain-text table in the seed's shape: a title underlined,
// optional group labels above column groups, then a header and rows.
type table struct {
	Title  string
	First  string // the first column's header
	Groups []tgroup
	Rows   []trow
}

type tgroup struct {
	Label string
	Cols  []string
}

type trow struct {
	Label string
	Cells []string
}

// render lays the table out with right-aligned columns.
func (t table) render() string {
	const gap = 3
	var heads []string
	for _, g := range t.Groups {
		heads = append(heads, g.Cols...)
	}
	w := make([]int, len(heads))
	for i, h := range heads {
		w[i] = len(h)
	}
	firstW := len(t.First)
	for _, r := range t.Rows {
		firstW = max(firstW, len(r.Label))
		for i, c := range r.Cells {
			if i < len(w) {
				w[i] = max(w[i], len(c))
			}
		}
	}
	var b strings.Builder
	b.WriteString(t.Title + "\n" + strings.Repeat("-", len(t.Title)) + "\n")
	labelled := false
	for _, g := range t.Groups {
		labelled = labelled || g.Label != ""
	}
	if labelled {
		line := strings.Repeat(" ", firstW)
		col := 0
		for _, g := range t.Groups {
			gw := 0
			for range g.Cols {
				gw += gap + w[col]
				col++
			}
			lbl := g.Label
			if len(lbl) > gw-gap {
				lbl = lbl[:gw-gap]
			}
			// Centre the label over the group.
			pad := gw - len(lbl)
			line += strings.Repeat(" ", pad-pad/2) + lbl + strings.Repeat(" ", pad/2)
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	row := func(first string, cells []string) {
		line := fmt.Sprintf("%*s", firstW, first)
		for i, c := range cells {
			if i < len(w) {
				line += strings.Repeat(" ", gap) + fmt.Sprintf("%*s", w[i], c)
			}
		}
		b.WriteString(line + "\n")
	}
	row(t.First, heads)
	for _, r := range t.Rows {
		row(r.Label, r.Cells)
	}
	return b.String()
}

// ---- host ----

// readRchar returns rchar from /proc/PID/io ("self" for this process).
func readRchar(pid string) (int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/io")
	if err != nil {
		return 0, err
	}
	return parseRchar(string(b))
}

// parseRchar finds "rchar: N" in the text of /proc/PID/io.
func parseRchar(s string) (int64, error) {
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "rchar:"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("no rchar line")
}

// raiseFileLimit raises RLIMIT_NOFILE as far as it may go (fs.nr_open,
// at most 2^20, as fuse.Start does; else the hard limit) and returns the
// soft limit then in force, 0 when unknown.
func raiseFileLimit() uint64 {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	want := lim.Max
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n > want {
			want = min(n, 1<<20)
		}
	}
	if unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: want, Max: max(want, lim.Max)}) != nil {
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: lim.Max, Max: lim.Max})
	}
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}

func dropCaches() error {
	unix.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200)
}

// layoutSparse makes the read files rd.<job>.0 in dir: sparse files of
// size bytes (holes read as zeros without touching memory on tmpfs).
func layoutSparse(dir string, jobs int, size int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for j := 0; j < jobs; j++ {
		p := filepath.Join(dir, workload.FileName("$jobname.$jobnum.$filenum", "rd", j, 0))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		err = f.Truncate(size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func hostVariants(o options) []variant {
	vs := []variant{{serverKlab, transportDev}, {serverKlab, transportRing}}
	if o.libfuseHP != "" {
		vs = append(vs, variant{serverLibfuse, transportDev}, variant{serverLibfuse, transportRing})
	}
	if o.libfuseLL != "" {
		vs = append(vs, variant{serverLL, transportDev})
	}
	return vs
}

func runHost(ctx context.Context, o options) ([]Cell, *PartInfo, error) {
	start := time.Now()
	h, _ := results.HostInfo()
	info := &PartInfo{Kernel: h.KernelRelease, CPUs: h.CPUs, CPUModel: h.CPUModel, MemMiB: int(h.MemKiB / 1024)}
	defer func() { info.Wall = time.Since(start) }()
	if q, err := possibleCPUs(); err == nil {
		info.Queues = q
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, info, err
	}
	base, err := os.MkdirTemp("/dev/shm", "klab-bench-fuse-")
	if err != nil {
		return nil, info, fmt.Errorf("backing directory on /dev/shm: %w", err)
	}
	defer func() {
		// A mount left behind by a failed teardown must not make
		// RemoveAll walk into it.
		if ents, err := os.ReadDir(base); err == nil {
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "m") {
					_ = unix.Unmount(filepath.Join(base, e.Name()), unix.MNT_DETACH)
				}
			}
		}
		os.RemoveAll(base)
	}()
	info.Backing = base + " (tmpfs)"
	var st unix.Statfs_t
	if err := unix.Statfs(base, &st); err == nil && st.Type != unix.TMPFS_MAGIC {
		info.Backing = base + " (NOT tmpfs)"
	}
	backing := filepath.Join(base, "b")
	if err := layoutSparse(backing, slices.Max(o.jobs), o.hostSize); err != nil {
		return nil, info, fmt.Errorf("lay out read files: %w", err)
	}
	hpUring := []string{"-o", "io_uring", "-o", "io_uring_q_depth=" + strconv.Itoa(o.queueDepth)}
	if o.libfuseHP != "" {
		hpUring, err = libfuseURingArgs(ctx, o.libfuseHP, o.queueDepth)
		if err != nil {
			return nil, info, err
		}
		argv := append([]string{o.libfuseHP, "--foreground", "--nopassthrough"}, o.libfuseArgs...)
		info.Note = fmt.Sprintf("libfuse (hp columns): %s [%s] SRC MNT", strings.Join(argv, " "), strings.Join(hpUring, " "))
	}
	if o.libfuseLL != "" {
		info.Note = strings.TrimSpace(info.Note + fmt.Sprintf("\nlibfuse (ll columns): %s -f -o source=SRC,max_threads=%d,no_writeback,timeout=1 MNT", o.libfuseLL, o.devThreads))
	}

	// The passthrough servers keep a descriptor per file the kernel
	// knows, so a create cell must stay below the open file limit.
	if lim := raiseFileLimit(); lim > 0 && o.hostCreates > int(lim)-2000 {
		o.hostCreates = max(1000, int(lim)-2000)
		info.Note = strings.TrimSpace(info.Note + fmt.Sprintf("\ncreate cells make at most %d files: RLIMIT_NOFILE is %d here and the servers keep a descriptor per file", o.hostCreates, lim))
	}

	plan := makePlan(o.workloads, o.jobs, o.rounds, hostVariants(o))
	pr := &progress{where: "host", total: len(plan), start: start}
	pr.line(0, "%d cells of %gs: %s; sparse read files of %s per job in %s", len(plan), o.seconds,
		strings.Join(workloadKeys(o.workloads), ","), workload.FormatSize(o.hostSize), backing)
	var cells []Cell
	for i, p := range plan {
		if ctx.Err() != nil {
			return cells, info, ctx.Err()
		}
		c := hostCell(ctx, o, exe, base, backing, i, p, hpUring)
		cells = append(cells, c)
		pr.line(i+1, "%s", cellLine(&c))
	}
	return cells, info, nil
}

// cellLine is a cell's progress line.
func cellLine(c *Cell) string {
	s := fmt.Sprintf("%-10s jobs=%d %-17s round %d: ", c.Workload, c.Jobs, variant{c.Server, c.Transport}, c.Round+1)
	if c.Error != "" {
		return s + "ERROR " + c.Error
	}
	s += fmt.Sprintf("%.0f %s", c.Value, c.Unit)
	if c.ServedRatio > 0 {
		s += fmt.Sprintf(", server read %.2fx", c.ServedRatio)
	}
	if c.RingRequests > 0 {
		s += fmt.Sprintf(", %d ring requests", c.RingRequests)
	}
	if c.Requests > 0 {
		s += fmt.Sprintf(", %d requests, server CPU %.1f us/req", c.Requests, c.CPUPerReqUs)
	} else if c.CostError != "" {
		s += ", no CPU per request: " + c.CostError
	}
	if c.Metrics != nil {
		s += fmt.Sprintf(", %.1fs", float64(c.Metrics.RuntimeNs)/1e9)
	}
	if c.Warning != "" {
		s += " WARNING: " + c.Warning
	}
	return s
}

// hostCell mounts a fresh server, runs the client in a child process and
// tears down.
func hostCell(ctx context.Context, o options, exe, base, backing string, seq int, p planned, hpUring []string) (c Cell) {
	c = newCell("host", seq, p)
	c.Start = time.Now()
	defer func() { c.WallMs = time.Since(c.Start).Milliseconds() }()
	mnt := filepath.Join(base, fmt.Sprintf("m%d", seq))
	bk := backing
	if p.W.isCreate() || p.W.isWrite() {
		bk = filepath.Join(base, fmt.Sprintf("c%d", seq))
		defer os.RemoveAll(bk)
	}
	for _, d := range []string{mnt, bk} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			c.Error = err.Error()
			return c
		}
	}
	defer os.Remove(mnt)
	if o.dropCaches {
		if err := dropCaches(); err != nil {
			c.Warning = "drop_caches: " + err.Error()
		}
	}
	srv, err := startServer(ctx, o, p.V, mnt, bk, hpUring)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	r0, rerr := readRchar(srv.pid())
	step := stepFor(p.W, p.Jobs, mnt, o.seconds, o.hostSize, o.hostCreates)
	cpuPID, conn := srv.cost()
	meter := startCost(cpuPID, conn)
	res, err := runClient(ctx, exe, &step, time.Duration(o.seconds*float64(time.Second))+3*time.Minute, srv.abort)
	cpu, reqs, cerr := meter.stop()
	r1, rerr2 := readRchar(srv.pid())
	if cerr != nil {
		c.CostError = cerr.Error()
	} else {
		c.ServerCPUNs, c.Requests = int64(cpu), reqs
		if reqs > 0 {
			c.CPUPerReqUs = float64(cpu.Microseconds()) / float64(reqs)
		}
	}
	if terr := srv.close(); terr != nil && err == nil {
		c.Warning = strings.TrimPrefix(c.Warning+"; teardown: "+terr.Error(), "; ")
	}
	// After close: a klab server in its own process prints its counters
	// when it stops.
	if st := srv.stats(); st != nil {
		c.FUSEStats, _ = json.Marshal(st)
		if st.Ring != nil {
			c.RingRequests = st.Ring.Requests
		}
		if st.Dev != nil {
			c.SplicedBytes = int64(st.Dev.SplicedBytes)
		}
	}
	if res != nil {
		c.Metrics, c.Samples = res.Metrics, res.Samples
		if res.Error != "" && err == nil {
			err = errors.New(res.Error)
		}
	}
	if err != nil {
		c.Error = err.Error()
	}
	// The client was reaped between the two readings, which added its
	// rchar to ours (klab's server is this process).
	haveRchar := rerr == nil && rerr2 == nil
	if srv.pid() == "self" {
		haveRchar = haveRchar && res != nil && res.Rchar >= 0
		if haveRchar {
			r1 -= res.Rchar
		}
	}
	if haveRchar {
		c.ServerRchar = r1 - r0
	}
	w := c.Warning
	c.Warning = ""
	c.finish(p.W, false, haveRchar)
	if w != "" {
		c.Warning = strings.TrimPrefix(c.Warning+"; "+w, "; ")
	}
	return c
}

// server is a mounted server on the host: klab's in this process, or
// passthrough_hp as a child.
type server interface {
	pid() string
	// cost returns what costMeter measures: the server's process (0:
	// this one) and its FUSE connection.
	cost() (pid int, conn uint32)
	stats() *fuse.Stats
	abort()
	close() error
}

// klabServer is a fuse.Session: klab's server in this process, or
// passthrough_ll as its child.
type klabServer struct{ s *fuse.Session }

func (k klabServer) pid() string {
	if k.s.Conn() == nil {
		return strconv.Itoa(k.s.ServerPID())
	}
	return "self"
}

func (k klabServer) cost() (int, uint32) {
	if k.s.Conn() == nil {
		return k.s.ServerPID(), k.s.ConnID()
	}
	return 0, k.s.ConnID()
}

func (k klabServer) stats() *fuse.Stats {
	st := k.s.Stats()
	return &st
}
func (k klabServer) abort()       { _ = k.s.Abort() }
func (k klabServer) close() error { return k.s.Close() }

func startServer(ctx context.Context, o options, v variant, mnt, backing string, hpUring []string) (server, error) {
	if v.Server == serverLibfuse {
		return startHP(ctx, o, v, mnt, backing, hpUring)
	}
	cfg := fuse.DefaultConfig()
	cfg.Transport = v.Transport
	cfg.Mountpoint, cfg.Backing = mnt, backing
	if v.Server == serverLL {
		// As seed 000: passthrough_ll -o max_threads=N -o source=SRC.
		cfg.Server, cfg.LibfusePath, cfg.Threads = fuse.ServerLibfusePassthroughLL, o.libfuseLL, o.devThreads
		s, err := fuse.Start(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("start passthrough_ll: %w", err)
		}
		return klabServer{s}, nil
	}
	if o.klabBin != "" {
		return startKlabProc(ctx, o, v, mnt, backing)
	}
	if v.Transport == transportDev {
		cfg.Threads = o.devThreads
	} else {
		cfg.Threads = 0
		cfg.QueueDepth = o.queueDepth
	}
	if o.noCache {
		cfg.AttrTimeout, cfg.EntryTimeout = 0, 0
	}
	if o.verbose {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s, err := fuse.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("start klab %s server: %w", v.Transport, err)
	}
	return klabServer{s}, nil
}

// klabProc is klab's server in a process of its own: `klab fuse serve`.
type klabProc struct {
	cmd    *exec.Cmd
	mnt    string
	conn   uint32
	done   chan struct{}
	stdout bytes.Buffer
	stderr syncBuffer
	st     *fuse.Stats // parsed from --stats at close
}

// syncBuffer is a bytes.Buffer that a child writes while we read it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (k *klabProc) pid() string         { return strconv.Itoa(k.cmd.Process.Pid) }
func (k *klabProc) cost() (int, uint32) { return k.cmd.Process.Pid, k.conn }
func (k *klabProc) stats() *fuse.Stats  { return k.st }
func (k *klabProc) abort()              { _ = devfuse.Abort(k.conn) }

// close stops the server as Ctrl-C does (it unmounts) and reads the
// counters it prints.
func (k *klabProc) close() error {
	_ = k.cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case <-k.done:
	case <-time.After(10 * time.Second):
		k.abort()
		_ = unix.Unmount(k.mnt, unix.MNT_DETACH)
		_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
		<-k.done
		err = fmt.Errorf("klab fuse serve on %s did not stop: %s", k.mnt, strings.TrimSpace(k.stderr.String()))
	}
	var st fuse.Stats
	if json.Unmarshal(k.stdout.Bytes(), &st) == nil {
		k.st = &st
	}
	return err
}

func startKlabProc(ctx context.Context, o options, v variant, mnt, backing string) (server, error) {
	args := []string{"fuse", "serve", "--transport", v.Transport, "--stats", "--backing", backing}
	if v.Transport == transportDev {
		args = append(args, "--threads", strconv.Itoa(o.devThreads))
	} else {
		args = append(args, "--queue-depth", strconv.Itoa(o.queueDepth))
	}
	if o.noCache {
		args = append(args, "--attr-timeout", "0", "--entry-timeout", "0")
	}
	args = append(args, mnt)
	k := &klabProc{mnt: mnt, done: make(chan struct{})}
	k.cmd = exec.Command(o.klabBin, args...)
	k.cmd.Stdout, k.cmd.Stderr = &k.stdout, &k.stderr
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := k.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.klabBin, err)
	}
	go func() { _ = k.cmd.Wait(); close(k.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(k.stderr.String(), "mounted on") {
		select {
		case <-k.done:
			return nil, fmt.Errorf("%s %s exited before mounting: %s", o.klabBin, strings.Join(args, " "), strings.TrimSpace(k.stderr.String()))
		case <-ctx.Done():
			_ = k.close()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = k.close()
			return nil, fmt.Errorf("%s did not mount %s within 20s", o.klabBin, mnt)
		}
	}
	m, err := devfuse.FindMount(mnt)
	if err != nil {
		_ = k.close()
		return nil, err
	}
	k.conn = m.ConnID()
	return k, nil
}

// hpServer is libfuse's passthrough_hp.
type hpServer struct {
	cmd  *exec.Cmd
	mnt  string
	conn uint32
	done chan struct{}
	out  *bytes.Buffer
}

func (h *hpServer) pid() string         { return strconv.Itoa(h.cmd.Process.Pid) }
func (h *hpServer) cost() (int, uint32) { return h.cmd.Process.Pid, h.conn }
func (h *hpServer) stats() *fuse.Stats  { return nil }
func (h *hpServer) abort()              { _ = devfuse.Abort(h.conn) }

func (h *hpServer) close() error {
	err := unix.Unmount(h.mnt, 0)
	if err != nil {
		h.abort()
		_ = unix.Unmount(h.mnt, unix.MNT_DETACH)
	}
	select {
	case <-h.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
		<-h.done
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", h.mnt, err)
	}
	return nil
}

// libfuseURingArgs asks passthrough_hp --help how it turns io_uring on:
// -o io_uring (libfuse 3.18) or --uring (3.17).
func libfuseURingArgs(ctx context.Context, path string, depth int) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, path, "--help").CombinedOutput()
	return uringArgsFromHelp(string(out), depth)
}

// uringArgsFromHelp picks passthrough_hp's io_uring arguments from its
// --help text.
func uringArgsFromHelp(help string, depth int) ([]string, error) {
	d := strconv.Itoa(depth)
	switch {
	case strings.Contains(help, "io_uring_q_depth"):
		return []string{"-o", "io_uring", "-o", "io_uring_q_depth=" + d}, nil
	case strings.Contains(help, "--uring-q-depth"):
		return []string{"--uring", "--uring-q-depth=" + d}, nil
	case strings.Contains(help, "io_uring") || strings.Contains(help, "--uring"):
		return nil, fmt.Errorf("passthrough_hp --help mentions io_uring but no queue depth option:\n%s", help)
	default:
		return nil, fmt.Errorf("passthrough_hp --help shows no io_uring option (libfuse 3.17+ is needed):\n%s", help)
	}
}

func startHP(ctx context.Context, o options, v variant, mnt, backing string, uringArgs []string) (server, error) {
	args := []string{"--foreground", "--nopassthrough"}
	args = append(args, o.libfuseArgs...)
	if v.Transport == transportRing {
		args = append(args, uringArgs...)
	}
	args = append(args, backing, mnt)
	cmd := exec.Command(o.libfuseHP, args...)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.libfuseHP, err)
	}
	h := &hpServer{cmd: cmd, mnt: mnt, done: make(chan struct{}), out: out}
	go func() { _ = cmd.Wait(); close(h.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m, err := devfuse.FindMount(mnt); err == nil && strings.HasPrefix(m.FSType, "fuse") {
			h.conn = m.ConnID()
			break
		}
		select {
		case <-h.done:
			return nil, fmt.Errorf("%s %s exited before mounting: %s", o.libfuseHP, strings.Join(args, " "), strings.TrimSpace(out.String()))
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-h.done
			_ = unix.Unmount(mnt, unix.MNT_DETACH)
			return nil, fmt.Errorf("%s did not mount %s within 10s", o.libfuseHP, mnt)
		}
	}
	if v.Transport == transportRing {
		// libfuse falls back to /dev/fuse quietly when the kernel does
		// not offer io_uring; fuse's enable_uring must be on.
		if b, err := os.ReadFile("/sys/module/fuse/parameters/enable_uring"); err == nil && strings.TrimSpace(string(b)) != "Y" {
			_ = h.close()
			return nil, errors.New("fuse's enable_uring is off: passthrough_hp would serve /dev/fuse")
		}
	}
	return h, nil
}

// clientResult is what the client process prints.
type clientResult struct {
	Metrics *proto.Metrics `json:"metrics,omitempty"`
	Samples []proto.Sample `json:"samples,omitempty"`
	Error   string         `json:"error,omitempty"`
	// Rchar is the client's own rchar when it ended: the kernel adds a
	// reaped child's I/O counters to its parent's, that is to the
	// server's, and this is what to take off again.
	Rchar int64 `json:"rchar"`
}

// runClient runs step in a child process (this binary as the client). On
// timeout it aborts the connection first: a client waiting on the server
// cannot be killed otherwise.
func runClient(ctx context.Context, exe string, step *proto.WorkloadStep, timeout time.Duration, abort func()) (*clientResult, error) {
	in, err := json.Marshal(step)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), clientEnv+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		abort()
		return cmd.Process.Kill()
	}
	err = cmd.Run()
	var res clientResult
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
		if err == nil {
			err = jerr
		}
		return nil, fmt.Errorf("client: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("client ran past %v: %w", timeout, err)
		}
		return &res, err
	}
	return &res, nil
}

// clientMain is the client process.
func clientMain() int {
	var step proto.WorkloadStep
	if err := json.NewDecoder(os.Stdin).Decode(&step); err != nil {
		fmt.Fprintln(os.Stderr, "client: decode step:", err)
		return 2
	}
	var res clientResult
	var mu sync.Mutex
	m, err := workload.Run(context.Background(), &step, workload.Options{
		Version: "klab-bench-fuse",
		OnSample: func(s proto.Sample) {
			mu.Lock()
			res.Samples = append(res.Samples, s)
			mu.Unlock()
		},
	})
	res.Metrics = m
	if err != nil {
		res.Error = err.Error()
	}
	if n, err := readRchar("self"); err == nil {
		res.Rchar = n
	} else {
		res.Rchar = -1
	}
	if err := json.NewEncoder(os.Stdout).Encode(&res); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	return 0
}

func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, err
		}
		z := a
		if isRange {
			if z, err = strconv.Atoi(hi); err != nil {
				return 0, err
			}
		}
		n += z - a + 1
	}
	return n, nil
}
