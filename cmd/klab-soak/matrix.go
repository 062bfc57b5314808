package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// soakCellSpec is the experiment of every cell of the soak's matrix: one
// guest, one second of writes to tmpfs and a check, with a parameter that
// only names the row.
const soakCellSpec = `# One cell of klab-soak's long matrix: one short guest.
name: soak-cell
description: one second of 4 KiB writes to tmpfs, and uname
reference: |
  none: the soak's matrix cell
rounds: 1
vm:
  cpus: 1
  memory_mb: 512
params:
  row: ["0"]
setup:
  dirs: [/tmp/w]
workloads:
  - name: seqwrite-4k
    pattern: seqwrite
    dir: /tmp/w
    jobs: 1
    bs: 4k
    size: 4M
    runtime_s: 1
    time_based: true
    metric: bytes_per_sec
checks:
  - name: uname
    run: echo row ${row}; uname -r
`

// writeSoakMatrix writes the soak's matrix of cells cells (rows of
// soak-cell on each of kernels) into dir and returns its path.
func writeSoakMatrix(dir string, kernels []string, cells int) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "soak-cell.yaml"), []byte(soakCellSpec), 0o644); err != nil {
		return "", err
	}
	rows := (cells + len(kernels) - 1) / len(kernels)
	var b strings.Builder
	fmt.Fprintf(&b, "name: soak\ndescription: %d cells of one short guest each\nkernels:\n", rows*len(kernels))
	for _, k := range kernels {
		fmt.Fprintf(&b, "  - %s\n", k)
	}
	b.WriteString("experiments:\n")
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&b, "  - name: soak-cell.yaml\n    set: {row: \"%d\"}\n", i)
	}
	p := filepath.Join(dir, "soak.yaml")
	return p, os.WriteFile(p, []byte(b.String()), 0o644)
}

// procSample is what soakMatrix reads of the klab process.
type procSample struct {
	at        time.Duration
	rssKiB    int64
	fds       int
	threads   int
	qemuCount int
}

// readProc samples the process pid; ok is false once it is gone.
func readProc(pid int, tmp string, since time.Time) (procSample, bool) {
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return procSample{}, false
	}
	s := procSample{at: time.Since(since), fds: len(entries(filepath.Join("/proc", strconv.Itoa(pid), "fd")))}
	for _, l := range strings.Split(string(status), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			s.rssKiB, _ = strconv.ParseInt(f[1], 10, 64)
		case "Threads:":
			s.threads, _ = strconv.Atoi(f[1])
		}
	}
	s.qemuCount = len(qemuUsing(tmp, 0))
	return s, true
}

// soakMatrix runs one matrix of cells cells on kernels with --jobs jobs
// through the klab binary, with its own TMPDIR under dir, sampling klab's
// RSS, descriptors and threads as it goes; then checks that every cell
// completed, that no QEMU outlived it and that its TMPDIR is empty, and
// that the descriptors and memory of the end are those of the start.
func soakMatrix(ctx context.Context, klab string, kernels []string, cells, jobs int, dir string) (failed bool, err error) {
	file, err := writeSoakMatrix(filepath.Join(dir, "matrix"), kernels, cells)
	if err != nil {
		return true, err
	}
	tmp, out := filepath.Join(dir, "matrix-tmp"), filepath.Join(dir, "matrix-out")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return true, err
	}
	fmt.Printf("\na matrix of %d cells (soak-cell on %s) through %s matrix run --jobs %d, one process:\n", cells, strings.Join(kernels, ", "), klab, jobs)
	cmd := exec.CommandContext(ctx, klab, "--runs-dir", filepath.Join(dir, "matrix-runs"), "matrix", "run", file, "--jobs", strconv.Itoa(jobs), "--out", out)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return true, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var samples []procSample
	var werr error
	maxQEMU := 0
poll:
	for {
		if s, ok := readProc(cmd.Process.Pid, tmp, start); ok {
			samples = append(samples, s)
			maxQEMU = max(maxQEMU, s.qemuCount)
		}
		select {
		case werr = <-done:
			break poll
		case <-time.After(time.Second):
		}
	}
	wall := time.Since(start)
	var problems []string
	if werr != nil {
		problems = append(problems, fmt.Sprintf("klab matrix run: %v: %s", werr, tail(log.String(), 5)))
	}
	statuses := cellStatuses(out)
	complete := statuses["complete"]
	fmt.Printf("  %d of %d cells complete in %s (%s per cell with %d jobs); at most %d QEMU at once\n",
		complete, cells, wall.Round(time.Second), (wall / time.Duration(max(1, cells))).Round(100*time.Millisecond), jobs, maxQEMU)
	if complete != cells {
		problems = append(problems, fmt.Sprintf("cells by status: %v", statuses))
	}
	if maxQEMU > jobs {
		problems = append(problems, fmt.Sprintf("%d QEMU ran at once with --jobs %d", maxQEMU, jobs))
	}
	if pids := qemuUsing(tmp, 5*time.Second); len(pids) > 0 {
		problems = append(problems, fmt.Sprintf("QEMU %v outlived klab", pids))
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if left := entries(tmp); len(left) > 0 {
		problems = append(problems, fmt.Sprintf("left %s in its TMPDIR", strings.Join(left, ", ")))
	}
	if len(samples) >= 4 {
		// The start: once the first cells run (the kernels resolved, the
		// initramfs built); the end: the last sample before klab exits.
		first, last := samples[min(len(samples)/10+1, len(samples)-1)], samples[len(samples)-1]
		var peak int64
		maxFDs := 0
		for _, s := range samples {
			peak = max(peak, s.rssKiB)
			maxFDs = max(maxFDs, s.fds)
		}
		fmt.Printf("  klab at %s: RSS %.1f MiB, %d fds, %d threads; at %s: RSS %.1f MiB, %d fds, %d threads; peak RSS %.1f MiB, most fds %d\n",
			first.at.Round(time.Second), float64(first.rssKiB)/1024, first.fds, first.threads,
			last.at.Round(time.Second), float64(last.rssKiB)/1024, last.fds, last.threads, float64(peak)/1024, maxFDs)
		// Descriptors of the cells in flight come and go; what stays
		// after the last cell must not be more than what the first left.
		if last.fds > first.fds+2*jobs {
			problems = append(problems, fmt.Sprintf("open descriptors grew from %d to %d", first.fds, last.fds))
		}
		if float64(last.rssKiB) > float64(first.rssKiB)*1.5+8*1024 {
			problems = append(problems, fmt.Sprintf("klab's RSS grew from %.1f to %.1f MiB", float64(first.rssKiB)/1024, float64(last.rssKiB)/1024))
		}
	}
	return report(problems), nil
}

// cellStatuses counts the cells of the results tree out by status.
func cellStatuses(out string) map[string]int {
	counts := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(out, "cells", "*", "cell.json"))
	for _, f := range files {
		var c struct {
			Status string `json:"status"`
		}
		data, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(data, &c) != nil {
			counts["unreadable"]++
			continue
		}
		counts[c.Status]++
	}
	return counts
}
