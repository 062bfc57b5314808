package perf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// fold runs Fold on s and fails the test on an error.
func fold(t testing.TB, s string, l Limits) *Folded {
	t.Helper()
	f, err := Fold(strings.NewReader(s), l)
	if err != nil {
		t.Fatalf("Fold: %v", err)
	}
	checkFolded(t, f, l)
	return f
}

// stacks returns the stacks of f as a map.
func stacks(f *Folded) map[string]int64 {
	m := map[string]int64{}
	for _, s := range f.Stacks {
		m[s.Stack] = s.Count
	}
	return m
}

// checkFolded checks the invariants of any result of Fold with limits l.
func checkFolded(t testing.TB, f *Folded, l Limits) {
	t.Helper()
	l = l.withDefaults()
	if f.Stacks == nil {
		t.Fatal("Stacks is nil")
	}
	if len(f.Stacks) > l.MaxStacks {
		t.Fatalf("%d stacks, limit %d", len(f.Stacks), l.MaxStacks)
	}
	var size int
	var sum int64
	seen := map[string]bool{}
	for i, s := range f.Stacks {
		size += len(s.Stack)
		sum += s.Count
		if s.Count <= 0 {
			t.Fatalf("stack %q: count %d", s.Stack, s.Count)
		}
		if seen[s.Stack] {
			t.Fatalf("stack %q twice", s.Stack)
		}
		seen[s.Stack] = true
		if i > 0 {
			p := f.Stacks[i-1]
			if p.Count < s.Count || p.Count == s.Count && p.Stack >= s.Stack {
				t.Fatalf("stacks %d and %d out of order: %+v, %+v", i-1, i, p, s)
			}
		}
		if !utf8.ValidString(s.Stack) {
			t.Fatalf("stack %q is not UTF-8", s.Stack)
		}
		for _, r := range s.Stack {
			if unicode.IsSpace(r) || unicode.IsControl(r) {
				t.Fatalf("stack %q holds %q", s.Stack, r)
			}
		}
		names := strings.Split(s.Stack, ";")
		for _, n := range names {
			if n == "" {
				t.Fatalf("stack %q has an empty name", s.Stack)
			}
			if len(n) > maxName+2 {
				t.Fatalf("stack %q has a name of %d bytes", s.Stack, len(n))
			}
		}
		if frames := len(names) - 1; frames > l.MaxFrames {
			t.Fatalf("stack %q has %d frames, limit %d", s.Stack, frames, l.MaxFrames)
		}
	}
	if size > l.MaxBytes {
		t.Fatalf("%d bytes of stacks, limit %d", size, l.MaxBytes)
	}
	if f.Dropped < 0 || sum+f.Dropped != f.Samples {
		t.Fatalf("kept %d + dropped %d != samples %d", sum, f.Dropped, f.Samples)
	}
}

func TestFoldSample(t *testing.T) {
	data, err := os.ReadFile("testdata/perf-script.txt")
	if err != nil {
		t.Fatal(err)
	}
	f := fold(t, string(data), Limits{})
	if f.Samples != 17 || f.Dropped != 0 || f.Skipped != 0 || f.Truncated {
		t.Errorf("samples %d, dropped %d, skipped %d, truncated %v; want 17, 0, 0, false",
			f.Samples, f.Dropped, f.Skipped, f.Truncated)
	}
	want := []Stack{
		{"sh;[unknown];[dash]", 3},
		{"sh;[dash]", 2},
		{"sh;[unknown];__strcmp_evex", 2},
		{"kworker/0:0-vir;ret_from_fork_asm;ret_from_fork;kthread;worker_thread;process_one_work;vmstat_update;refresh_cpu_vm_stats;decay_pcp_high;_raw_spin_unlock_irqrestore", 1},
		{"perf;__libc_start_call_main;[perf];__restore_rt;[perf];asm_exc_page_fault;exc_page_fault;handle_mm_fault;count_memcg_events", 1},
		{"sh;[unknown];[dash];__memmove_avx512_unaligned_erms", 1},
		{"sh;[unknown];_IO_old_init", 1},
		{"sh;[unknown];__strpbrk_sse42", 1},
		{"sh;[unknown];_int_free", 1},
		{"sh;[unknown];strcmp@plt", 1},
		{"sh;__sigsetjmp", 1},
		{"sh;__strcmp_evex", 1},
		{"swapper;common_startup_64;x86_64_start_kernel;__pfx_clear_bss;start_kernel;rest_init;cpu_startup_entry;schedule_idle;__schedule;finish_task_switch.isra.0", 1},
	}
	if !reflect.DeepEqual(f.Stacks, want) {
		t.Errorf("stacks:\n%s\nwant:\n%s", dump(f.Stacks), dump(want))
	}
}

// dump formats stacks one a line.
func dump(s []Stack) string {
	var b strings.Builder
	for _, st := range s {
		fmt.Fprintf(&b, "\t%d %s\n", st.Count, st.Stack)
	}
	return b.String()
}

func TestFoldRules(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]int64
		skipped int64
	}{
		{
			name: "kernel frames, offsets stripped",
			in: "swapper     0 [000] 10700.597929:   10101010 cpu-clock: \n" +
				"\tffffffff821f2c2b pv_native_safe_halt+0xb ([kernel.kallsyms])\n" +
				"\tffffffff821f4735 default_idle+0x5 ([kernel.kallsyms])\n" +
				"\tffffffff813c3a84 do_idle+0x214 ([kernel.kallsyms])\n\n",
			want: map[string]int64{"swapper;do_idle;default_idle;pv_native_safe_halt": 1},
		},
		{
			name: "pid/tid, no period",
			in: "sh  1224/1224  [000] 10704.723376: cpu-clock: \n" +
				"\t            42b0 strcmp@plt+0x0 (/usr/bin/dash)\n" +
				"\t           1001c [unknown] ([unknown])\n\n",
			want: map[string]int64{"sh;[unknown];strcmp@plt": 1},
		},
		{
			name: "no cpu field, right-aligned comm",
			in: "            bash 12345 100.5: 1 cycles:u: \n" +
				"\t  4242 main+0x1 (/bin/bash)\n\n",
			want: map[string]int64{"bash;main": 1},
		},
		{
			name: "comm with spaces",
			in: "Web Content  77 [001] 5.000001: 1000 cpu-clock: \n" +
				"\t1 f+0x10 (/usr/lib/libxul.so)\n\n",
			want: map[string]int64{"Web_Content;f": 1},
		},
		{
			name: "numeric comm",
			in:   "1234  5678/5678 [001] 5.0: 1 cpu-clock:\n\t1 f (/x)\n",
			want: map[string]int64{"1234;f": 1},
		},
		{
			name: "unresolved frames",
			in: "a 1 [0] 1.0: 1 cpu-clock:\n" +
				"\tffffffff81000000 [unknown] ([kernel.kallsyms])\n" +
				"\t1 [unknown] (/usr/lib/x86_64-linux-gnu/libc.so.6)\n" +
				"\t2 [unknown] ([vdso])\n" +
				"\t3 [unknown] ([unknown])\n" +
				"\t4 [unknown] ()\n" +
				"\t5 [unknown]\n" +
				"\t6 +0x10 (/bin/x)\n\n",
			want: map[string]int64{"a;[x];[unknown];[vdso];[libc.so.6];[unknown]": 1},
		},
		{
			name: "consecutive unresolved frames folded",
			in: "a 1 [0] 1.0: 1 cpu-clock:\n" +
				"\t1 leaf (/bin/a)\n" +
				"\t2 [unknown] (/bin/a)\n" +
				"\t3 [unknown] (/bin/a)\n" +
				"\t4 [unknown] ([unknown])\n" +
				"\t5 [unknown] ([unknown])\n" +
				"\t6 [unknown] ([unknown])\n" +
				"\t7 mid (/bin/a)\n" +
				"\t8 [unknown] ([unknown])\n" +
				"\t9 rec (/bin/a)\n" +
				"\ta rec (/bin/a)\n\n",
			want: map[string]int64{"a;rec;rec;[unknown];mid;[unknown];[a];leaf": 1},
		},
		{
			name: "names sanitized",
			in: "my;comm\x01 1 [0] 1.0: 1 cpu-clock:\n" +
				"\t1 operator new(unsigned long)+0x1c (/usr/lib/libstdc++.so.6)\n" +
				"\t2 a;b\x7fc\u00a0d\xffe (/x)\n" +
				"\t3 [unknown] (/opt/my app;v2/bin)\n\n",
			want: map[string]int64{"my_comm_;[bin];a_b_c_d_e;operator_new(unsigned_long)": 1},
		},
		{
			name: "dso with parentheses",
			in: "a 1 [0] 1.0: 1 cpu-clock:\n" +
				"\t1 f(int) const+0x3 (/tmp/lib (deleted))\n" +
				"\t2 [unknown] (/tmp/lib (deleted))\n" +
				"\t3 g(x)\n\n",
			want: map[string]int64{"a;g(x);[lib_(deleted)];f(int)_const": 1},
		},
		{
			name: "offset-like suffixes kept",
			in:   "a 1 [0] 1.0: 1 cpu-clock:\n\t1 f+0xzz (/x)\n\t2 g+0x (/x)\n\t3 h+0x1+0x2 (/x)\n",
			want: map[string]int64{"a;h+0x1;g+0x;f+0xzz": 1},
		},
		{
			name: "samples without frames and without blank lines",
			in: "a 1 [0] 1.0: 1 cpu-clock:\n" +
				"a 1 [0] 1.1: 1 cpu-clock:\n" +
				"b 2 [1] 1.2: 1 cpu-clock:\n\t1 f (/x)\n" +
				"b 2 [1] 1.3: 1 cpu-clock:\n\t1 f (/x)",
			want: map[string]int64{"a": 2, "b;f": 2},
		},
		{
			name: "frame on the header line",
			in: "perf 10 [000] 1.000: 250000 cpu-clock:  ffffffff81000000 memcpy+0x5 ([kernel.kallsyms])\n" +
				"perf 10 [000] 1.001: 250000 cpu-clock:  4000 [unknown] (/usr/bin/perf)\n" +
				"perf 10 [000] 1.002: 250000 sched:sched_switch: prev_comm=perf prev_pid=10\n",
			want: map[string]int64{"perf;memcpy": 1, "perf;[perf]": 1, "perf": 1},
		},
		{
			name: "CRLF and space indentation",
			in:   "a 1 [0] 1.0: 1 cpu-clock:\r\n    1 f+0x1 (/x)\r\n  2 g (/x)  \r\n\r\n",
			want: map[string]int64{"a;g;f": 1},
		},
		{
			name: "garbage skipped",
			in: "garbage at the start\n" +
				"\t1 orphan (/x)\n" +
				"a 1 [0] 1.0: 1 cpu-clock:\n" +
				"\t1 f (/x)\n" +
				"\tnot-a-frame\n" +
				"\tzz g (/x)\n" +
				"\t2 g (/x)\n" +
				"\n" +
				"\t3 orphan (/x)\n" +
				"b 2 [0] 1.0: 1 cpu-clock:\n" +
				"\t1 h (/x)\n" +
				"junk ends the sample\n" +
				"\t2 lost (/x)\n" +
				"c 3 [0] 1.0: 1 cpu-clock:\n" +
				"c 3 [0] 1.0: 1 PERF_RECORD_COMM: c:3/3\n" +
				"\t4 lost (/x)\n",
			want:    map[string]int64{"a;g;f": 1, "b;h": 1, "c": 1},
			skipped: 9,
		},
		{
			name: "not headers",
			in: "a x [0] 1.0: 1 cpu-clock:\n" +
				"a 1 [x] 1.0: 1 cpu-clock:\n" +
				"a 1 [0] 1.0 1 cpu-clock:\n" +
				"a 1 [0] x.0: 1 cpu-clock:\n" +
				"1 [0] 1.0: 1 cpu-clock:\n" +
				"a 1/ [0] 1.0: 1 cpu-clock:\n",
			want:    map[string]int64{},
			skipped: 6,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fold(t, tt.in, Limits{})
			if got := stacks(f); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("stacks %v, want %v", got, tt.want)
			}
			var n int64
			for _, c := range tt.want {
				n += c
			}
			if f.Samples != n {
				t.Errorf("samples %d, want %d", f.Samples, n)
			}
			if f.Skipped != tt.skipped {
				t.Errorf("skipped %d, want %d", f.Skipped, tt.skipped)
			}
		})
	}
}

// sample returns a perf script sample of comm with the frames, leaf first.
func sample(comm string, frames ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s 1 [000] 1.000000: 1 cpu-clock: \n", comm)
	for i, f := range frames {
		fmt.Fprintf(&b, "\t%x %s+0x%x ([kernel.kallsyms])\n", uint64(0xffffffff81000000)+uint64(i), f, i)
	}
	b.WriteString("\n")
	return b.String()
}

func TestFoldMaxFrames(t *testing.T) {
	frames := make([]string, 200)
	for i := range frames {
		frames[i] = fmt.Sprintf("f%d", i)
	}
	in := sample("deep", frames...)
	f := fold(t, in, Limits{})
	names := strings.Split(f.Stacks[0].Stack, ";")
	if len(names) != 1+DefaultMaxFrames || names[0] != "deep" ||
		names[1] != fmt.Sprintf("f%d", DefaultMaxFrames-1) || names[len(names)-1] != "f0" {
		t.Errorf("default limit: %d names, %q ... %q", len(names), names[:2], names[len(names)-1])
	}
	f = fold(t, in, Limits{MaxFrames: 3})
	if want := "deep;f2;f1;f0"; f.Stacks[0].Stack != want {
		t.Errorf("3 frames: %q, want %q", f.Stacks[0].Stack, want)
	}
	// Unresolved frames are folded before counting.
	in = "a 1 [0] 1.0: 1 cpu-clock:\n\t1 f (/x)\n" + strings.Repeat("\t2 [unknown] ([unknown])\n", 10) + "\t3 g (/x)\n"
	f = fold(t, in, Limits{MaxFrames: 3})
	if want := "a;g;[unknown];f"; f.Stacks[0].Stack != want {
		t.Errorf("folded unknowns: %q, want %q", f.Stacks[0].Stack, want)
	}
}

func TestFoldMaxStacks(t *testing.T) {
	var in strings.Builder
	for i := range 10 {
		// Stack i is seen i+1 times.
		for range i + 1 {
			in.WriteString(sample("p", fmt.Sprintf("f%d", i)))
		}
	}
	in.WriteString(sample("p", "tie_b"))
	in.WriteString(sample("p", "tie_a"))
	f := fold(t, in.String(), Limits{MaxStacks: 3})
	want := []Stack{{"p;f9", 10}, {"p;f8", 9}, {"p;f7", 8}}
	if !reflect.DeepEqual(f.Stacks, want) {
		t.Errorf("stacks:\n%swant:\n%s", dump(f.Stacks), dump(want))
	}
	if f.Samples != 57 || f.Dropped != 57-27 {
		t.Errorf("samples %d, dropped %d; want 57, 30", f.Samples, f.Dropped)
	}
	// Ties are broken by the stack string.
	f = fold(t, in.String(), Limits{MaxStacks: 12})
	if n := len(f.Stacks); n != 12 || f.Stacks[10].Stack != "p;tie_a" || f.Stacks[11].Stack != "p;tie_b" {
		t.Errorf("ties:\n%s", dump(f.Stacks))
	}
}

func TestFoldMaxBytes(t *testing.T) {
	in := strings.Repeat(sample("p", "aaaaaaaaaa"), 3) + // 12 bytes
		strings.Repeat(sample("p", "bbbbbbbbbbbbbbbbbbbb"), 2) + // 22 bytes
		sample("p", "c") + // 3 bytes
		sample("p", strings.Repeat("x", 100)) // longer than any limit below
	f := fold(t, in, Limits{MaxBytes: 20})
	want := []Stack{{"p;aaaaaaaaaa", 3}, {"p;c", 1}}
	if !reflect.DeepEqual(f.Stacks, want) {
		t.Errorf("stacks:\n%swant:\n%s", dump(f.Stacks), dump(want))
	}
	if f.Samples != 7 || f.Dropped != 3 {
		t.Errorf("samples %d, dropped %d; want 7, 3", f.Samples, f.Dropped)
	}
}

func TestFoldMaxInput(t *testing.T) {
	one := sample("p", "f")
	in := strings.Repeat(one, 10)
	f := fold(t, in, Limits{MaxInput: int64(len(in))})
	if f.Truncated || f.Samples != 10 {
		t.Errorf("exact limit: truncated %v, samples %d", f.Truncated, f.Samples)
	}
	// The limit cuts the fourth sample's frame line: that line is not read,
	// but its header was, so the sample counts without frames.
	limit := 3*len(one) + strings.Index(one, "\t") + 5
	f = fold(t, in, Limits{MaxInput: int64(limit)})
	if !f.Truncated {
		t.Error("not truncated")
	}
	if got, want := stacks(f), map[string]int64{"p;f": 3, "p": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("stacks %v, want %v", got, want)
	}
	// The reader is not read much beyond the limit.
	cr := &countingReader{r: strings.NewReader(strings.Repeat(one, 100000))}
	if _, err := Fold(cr, Limits{MaxInput: 1000}); err != nil {
		t.Fatal(err)
	}
	if cr.n > 1001 {
		t.Errorf("read %d bytes, limit 1000", cr.n)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestFoldLongLines(t *testing.T) {
	long := strings.Repeat("y", maxLine+10)
	in := sample("a", "f") +
		"\t1 " + long + " (/x)\n" + // a frame too long: skipped
		"a 1 [0] 1.0: 1 cpu-clock:\n\t1 g (/x)\n\t2 " + long + " (/x)\n\t3 h (/x)\n\n" +
		long + " 1 [0] 1.0: 1 cpu-clock:\n\t1 lost (/x)\n\n" + // a header too long
		sample("b", "f")
	f := fold(t, in, Limits{})
	want := map[string]int64{"a;f": 1, "a;h;g": 1, "b;f": 1}
	if got := stacks(f); !reflect.DeepEqual(got, want) {
		t.Errorf("stacks %v, want %v", got, want)
	}
	if f.Skipped != 4 {
		t.Errorf("skipped %d, want 4", f.Skipped)
	}
	// A line of exactly the limit is read.
	name := strings.Repeat("z", maxLine-len("\t1  (/x)"))
	f = fold(t, "a 1 [0] 1.0: 1 cpu-clock:\n\t1 "+name+" (/x)\n", Limits{})
	if f.Skipped != 0 || len(f.Stacks) != 1 || !strings.HasSuffix(f.Stacks[0].Stack, "..") {
		t.Errorf("line of %d bytes: skipped %d, stacks %d", maxLine, f.Skipped, len(f.Stacks))
	}
}

func TestFoldLongNames(t *testing.T) {
	name := strings.Repeat("é", maxName) // 2 bytes each
	f := fold(t, sample(strings.Repeat("c", 2*maxName), name), Limits{})
	comm, leaf, _ := strings.Cut(f.Stacks[0].Stack, ";")
	if want := strings.Repeat("c", maxName) + ".."; comm != want {
		t.Errorf("comm of %d bytes, want %d", len(comm), len(want))
	}
	if want := strings.Repeat("é", maxName/2) + ".."; leaf != want {
		t.Errorf("leaf of %d bytes, want %d", len(leaf), len(want))
	}
}

func TestFoldReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader(sample("a", "f")), &errReader{boom})
	f, err := Fold(r, Limits{})
	if !errors.Is(err, boom) || f != nil {
		t.Errorf("Fold = %v, %v; want nil, %v", f, err, boom)
	}
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }

func TestFoldEmpty(t *testing.T) {
	for _, in := range []string{"", "\n\n\n", "\t1 f (/x)\n"} {
		f := fold(t, in, Limits{})
		if f.Samples != 0 || len(f.Stacks) != 0 {
			t.Errorf("%q: %+v", in, f)
		}
	}
}

func TestFoldPrune(t *testing.T) {
	var in strings.Builder
	for i := range 100 {
		in.WriteString(sample("p", "hot"))
		in.WriteString(sample("p", fmt.Sprintf("cold%d", i)))
	}
	l := Limits{}.withDefaults()
	f := newFolder(l)
	f.pruneStacks = 10
	for line := range strings.Lines(in.String()) {
		f.line([]byte(line))
	}
	f.flush()
	if len(f.entries) > 11 {
		t.Errorf("%d entries kept, prune limit 10", len(f.entries))
	}
	res := f.result()
	checkFolded(t, res, l)
	if res.Samples != 200 || res.Stacks[0] != (Stack{"p;hot", 100}) {
		t.Errorf("samples %d, first %+v; want 200, {p;hot 100}", res.Samples, res.Stacks[0])
	}
	f = newFolder(l)
	f.pruneBytes = 40
	for line := range strings.Lines(in.String()) {
		f.line([]byte(line))
	}
	f.flush()
	if f.keyBytes > 40+len("p;cold99") {
		t.Errorf("%d bytes of keys kept, prune limit 40", f.keyBytes)
	}
	checkFolded(t, f.result(), l)
}

func TestFoldedJSON(t *testing.T) {
	f := fold(t, sample("a", "f")+sample("a", "f"), Limits{})
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"samples":2,"stacks":[{"stack":"a;f","count":2}]}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	b, err = json.Marshal(fold(t, "", Limits{}))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"samples":0,"stacks":[]}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
}

func FuzzFold(f *testing.F) {
	data, err := os.ReadFile("testdata/perf-script.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, uint8(0), uint8(0), uint16(0), uint16(0))
	f.Add(data, uint8(2), uint8(3), uint16(100), uint16(2000))
	f.Add([]byte("a b 1/2 [0] 1.0: 1 e:\n\t1 [unknown] ([unknown])\n\t2 [unknown] ([unknown])\n\t3 f;g+0x1 (/a b/c)\n"), uint8(1), uint8(1), uint16(10), uint16(0))
	f.Add([]byte("x 1 2: 3 PERF_RECORD_X:\n\tff ((((\n\tff ))))\n\tff a (b) (c)\n"), uint8(0), uint8(0), uint16(0), uint16(30))
	f.Fuzz(func(t *testing.T, data []byte, frames, nstacks uint8, nbytes, input uint16) {
		l := Limits{MaxFrames: int(frames), MaxStacks: int(nstacks), MaxBytes: int(nbytes), MaxInput: int64(input)}
		cr := &countingReader{r: bytes.NewReader(data)}
		res, err := Fold(cr, l)
		if err != nil {
			t.Fatal(err)
		}
		checkFolded(t, res, l)
		limit := l.withDefaults().MaxInput
		if int64(cr.n) > limit+1 {
			t.Fatalf("read %d bytes, limit %d", cr.n, limit)
		}
		if res.Truncated != (int64(len(data)) > limit) {
			t.Fatalf("truncated %v with %d bytes, limit %d", res.Truncated, len(data), limit)
		}
	})
}

// syntheticInput returns perf script output of n samples drawn from a few
// hundred distinct stacks of kernel and user frames.
func syntheticInput(n int) []byte {
	comms := []string{"swapper", "fio", "kworker/0:1-events", "sh", "Web Content"}
	kernel := []string{"entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_read",
		"ksys_read", "vfs_read", "ext4_file_read_iter", "filemap_read", "copy_page_to_iter",
		"_copy_to_user", "rep_movs_alternative", "do_idle", "default_idle", "pv_native_safe_halt"}
	var b bytes.Buffer
	seed := uint32(1)
	next := func() int {
		seed = seed*1664525 + 1013904223
		return int(seed >> 8)
	}
	for i := range n {
		fmt.Fprintf(&b, "%-15s %5d/%-5d [%03d] %d.%06d: %10d cpu-clock: \n",
			comms[next()%len(comms)], 1000+i%7, 1000+i%7, i%4, 10000+i/1000, i%1000000, 10101010)
		depth := 3 + next()%10
		for d := range depth {
			fmt.Fprintf(&b, "\tffffffff%08x %s+0x%x ([kernel.kallsyms])\n", next()&0xffffff, kernel[(d*3+next()%3)%len(kernel)], next()%0x400)
		}
		if next()%2 == 0 {
			fmt.Fprintf(&b, "\t%16x [unknown] (/usr/bin/fio)\n\t%16x __libc_start_main+0x80 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n", next(), next())
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}

func BenchmarkFold(b *testing.B) {
	in := syntheticInput(100000)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		f, err := Fold(bytes.NewReader(in), Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if f.Samples != 100000 {
			b.Fatalf("%d samples", f.Samples)
		}
	}
}
