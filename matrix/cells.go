package matrix

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Cell is one experiment on one kernel.
type Cell struct {
	// ID names the cell's directory in the results tree: the experiment's
	// label and the kernel's ref, made file-name safe
	// ("fuse-uring_jobs_1@debian_7.3").
	ID string `json:"id"`
	// Kernel is the kernel's ref; Experiment the experiment's label.
	Kernel     string `json:"kernel"`
	Experiment string `json:"experiment"`
	// K and E index File.Kernels and File.Experiments.
	K int `json:"k"`
	E int `json:"e"`
}

// Name is the cell as a reader sees it.
func (c Cell) Name() string { return c.Experiment + " on " + c.Kernel }

// Cells returns every cell, sorted by ID: the order shards are cut from,
// the same on every machine for the same file.
func (f *File) Cells() []Cell {
	var cells []Cell
	for e, x := range f.Experiments {
		for k, kr := range f.Kernels {
			cells = append(cells, Cell{ID: safe(x.Label) + "@" + safe(kr.Ref), Kernel: kr.Ref, Experiment: x.Label, K: k, E: e})
		}
	}
	sort.Slice(cells, func(i, j int) bool { return cells[i].ID < cells[j].ID })
	return cells
}

// safe maps s to letters, digits, '.', '-' and '_'.
func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, strings.TrimLeft(s, "/."))
}

// Shard is the part i (1..N) of N of a matrix's cells.
type Shard struct {
	I, N int
}

// ParseShard parses "i/n" (1 <= i <= n); "" is the whole matrix. Its
// error starts with s quoted, for the caller to name where it came from.
func ParseShard(s string) (Shard, error) {
	if s == "" {
		return Shard{1, 1}, nil
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n || n > 1000 {
		return Shard{}, fmt.Errorf("%q: want i/n with 1 <= i <= n <= 1000 (2/4 is the second of four shards)", s)
	}
	return Shard{i, n}, nil
}

// String is "i/n".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.I, s.N) }

// Of returns the shard's cells: every N-th of the sorted cells, starting
// at the I-th. Every cell is in exactly one shard.
func (s Shard) Of(cells []Cell) []Cell {
	if s.N <= 1 {
		return cells
	}
	var out []Cell
	for j, c := range cells {
		if j%s.N == s.I-1 {
			out = append(out, c)
		}
	}
	return out
}
