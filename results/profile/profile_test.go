package profile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
)

// profileOf returns a profile of stacks and counts given in pairs.
func profileOf(pairs ...any) *Profile {
	p := New()
	for i := 0; i < len(pairs); i += 2 {
		p.Add(pairs[i].(string), int64(pairs[i+1].(int)))
	}
	return p
}

func TestAdd(t *testing.T) {
	p := &Profile{} // a nil map is fine
	p.Add("a;f", 2)
	p.Add("a;f", 3)
	p.Add("a;g", 0)
	p.Add("a;h", -1)
	p.Add("", 5)
	p.Add("a\n;x\x00y\xff", 1)
	want := map[string]int64{"a;f": 5, "a_;x_y_": 1}
	if !reflect.DeepEqual(p.Stacks, want) {
		t.Errorf("stacks %v, want %v", p.Stacks, want)
	}
	if p.Total() != 6 {
		t.Errorf("total %d, want 6", p.Total())
	}
	p.Add("a;f", math.MaxInt64)
	p.Add("b", math.MaxInt64)
	if p.Stacks["a;f"] != math.MaxInt64 || p.Total() != math.MaxInt64 {
		t.Errorf("no saturation: %v, total %d", p.Stacks, p.Total())
	}
	var nilp *Profile
	if nilp.Total() != 0 || len(nilp.Shares()) != 0 {
		t.Error("nil profile not empty")
	}
}

func TestMerge(t *testing.T) {
	a := profileOf("x;f", 1, "x;g", 2)
	b := profileOf("x;g", 3, "y;h", 4)
	a.Merge(b)
	a.Merge(nil)
	want := map[string]int64{"x;f": 1, "x;g": 5, "y;h": 4}
	if !reflect.DeepEqual(a.Stacks, want) {
		t.Errorf("stacks %v, want %v", a.Stacks, want)
	}
	if len(b.Stacks) != 2 {
		t.Errorf("merge changed its argument: %v", b.Stacks)
	}
	a.Merge(a)
	if a.Total() != 20 {
		t.Errorf("self merge: total %d, want 20", a.Total())
	}
}

// near reports whether a and b are equal up to rounding.
func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestShares(t *testing.T) {
	p := profileOf(
		"sh;main;parse;strcmp", 4,
		"sh;main;parse;parse;parse", 2, // recursion: once per stack for inclusive
		"sh;main;eval", 3,
		"kworker;worker_thread;main", 1, // main in another process
		"swapper", 10, // no frames: only in the total
		"sh;main;;eval", 0, // ignored
	)
	got := p.Shares()
	want := map[string]Share{
		"main":          {Inclusive: 10.0 / 20, Self: 1.0 / 20},
		"parse":         {Inclusive: 6.0 / 20, Self: 2.0 / 20},
		"strcmp":        {Inclusive: 4.0 / 20, Self: 4.0 / 20},
		"eval":          {Inclusive: 3.0 / 20, Self: 3.0 / 20},
		"worker_thread": {Inclusive: 1.0 / 20},
	}
	if len(got) != len(want) {
		t.Errorf("shares %v, want %v", got, want)
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok || !near(g.Inclusive, w.Inclusive) || !near(g.Self, w.Self) {
			t.Errorf("%s: %+v, want %+v", name, g, w)
		}
	}
	for _, name := range []string{"sh", "kworker", "swapper", ""} {
		if _, ok := got[name]; ok {
			t.Errorf("process name or empty name %q has a share", name)
		}
	}
	// Empty names in a stack are skipped.
	got = profileOf("a;;f;", 1).Shares()
	if len(got) != 1 || got["f"] != (Share{Inclusive: 1}) {
		t.Errorf("empty names: %v", got)
	}
	if n := len(New().Shares()); n != 0 {
		t.Errorf("empty profile has %d shares", n)
	}
}

func TestDiff(t *testing.T) {
	a := profileOf(
		"p;root;up", 10,
		"p;root;down", 50,
		"p;root;same", 20,
		"p;root;gone", 15,
		"p;root;tiny", 5,
	) // total 100
	b := profileOf(
		"p;root;up", 40,
		"p;root;down", 20,
		"p;root;same", 20,
		"p;root;new", 15,
		"p;root;tiny", 5,
	) // total 100
	got := Diff(a, b, 0, 0.06)
	var names []string
	for _, c := range got {
		names = append(names, fmt.Sprintf("%s%+.2f", c.Func, c.Delta()))
	}
	// up and down move by 0.30, gone and new by 0.15: ties by name. root
	// and same do not move; tiny is under minShare on both sides.
	want := []string{"down-0.30", "up+0.30", "gone-0.15", "new+0.15", "root+0.00", "same+0.00"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("Diff = %v, want %v", names, want)
	}
	if got[0].A != (Share{Inclusive: 0.5, Self: 0.5}) || got[0].B != (Share{Inclusive: 0.2, Self: 0.2}) {
		t.Errorf("down: %+v", got[0])
	}
	if got[3].A != (Share{}) {
		t.Errorf("new has a share in A: %+v", got[3])
	}
	if got := Diff(a, b, 2, 0.06); len(got) != 2 || got[0].Func != "down" || got[1].Func != "up" {
		t.Errorf("Diff n=2 = %+v", got)
	}
	if got := Diff(a, b, 100, 0); len(got) != 7 {
		t.Errorf("Diff minShare=0: %d changes, want 7", len(got))
	}
	if got := Diff(nil, b, 0, 0); len(got) != 6 || got[0].Func != "root" || got[0].Delta() != 1 {
		t.Errorf("Diff from nil = %+v", got)
	}
	if got := Diff(a, b, 0, 2); len(got) != 0 {
		t.Errorf("Diff minShare=2 = %+v", got)
	}
}

func TestLookup(t *testing.T) {
	a := profileOf("p;f;g", 1, "p;f", 1)
	b := profileOf("p;g", 4)
	got := Lookup(a, b, []string{"g", "missing", "f"})
	want := []Change{
		{Func: "g", A: Share{Inclusive: 0.5, Self: 0.5}, B: Share{Inclusive: 1, Self: 1}},
		{Func: "missing"},
		{Func: "f", A: Share{Inclusive: 1, Self: 0.5}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Lookup = %+v, want %+v", got, want)
	}
	if got[0].Delta() != 0.5 || got[2].Delta() != -1 {
		t.Errorf("deltas %v, %v", got[0].Delta(), got[2].Delta())
	}
	if got := Lookup(a, b, nil); len(got) != 0 {
		t.Errorf("Lookup(nil) = %v", got)
	}
}

func TestReadFolded(t *testing.T) {
	in := "sh;main;f 3\n" +
		"\n" +
		"sh;main;f 2\r\n" +
		"   \n" +
		"Web Content;a b 7\n" + // spaces in a stack: the count follows the last one
		"sh;zero 0\n" +
		"swapper 1"
	p, err := ReadFolded(strings.NewReader(in), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"sh;main;f": 5, "Web Content;a b": 7, "swapper": 1}
	if !reflect.DeepEqual(p.Stacks, want) {
		t.Errorf("stacks %v, want %v", p.Stacks, want)
	}
	if p, err := ReadFolded(strings.NewReader(""), 10); err != nil || len(p.Stacks) != 0 {
		t.Errorf("empty input: %v, %v", p, err)
	}
}

func TestReadFoldedErrors(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"a 1\nnocount\n", "line 2: no count"},
		{"a 1\n\nb 2\n 3\n", "line 4: empty stack"},
		{"a 1\nb x\n", `line 2: bad count "x"`},
		{"a 1\nb \n", `line 2: bad count ""`},
		{"a 1.5\n", `line 1: bad count "1.5"`},
		{"a -1\n", "line 1: negative count -1"},
		{"a 99999999999999999999\n", "line 1: bad count"},
		{"a\t1\n", "line 1: no count"},
	}
	for _, tt := range tests {
		_, err := ReadFolded(strings.NewReader(tt.in), 0)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "profile: ") {
			t.Errorf("%q: error %v, want one with %q", tt.in, err, tt.want)
		}
	}
	// A bad count wraps the strconv error.
	_, err := ReadFolded(strings.NewReader("a x\n"), 0)
	var numErr interface{ Unwrap() error }
	if !errors.As(err, &numErr) {
		t.Errorf("error %v does not wrap", err)
	}
	// A long line is clipped in the message.
	_, err = ReadFolded(strings.NewReader(strings.Repeat("x", 10000)+"\n"), 0)
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("long line: error %v", err)
	}
}

func TestReadFoldedLimit(t *testing.T) {
	in := "a;f 1\nb;g 2\n" // 12 bytes
	if _, err := ReadFolded(strings.NewReader(in), 12); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	_, err := ReadFolded(strings.NewReader(in), 11)
	if err == nil || !strings.Contains(err.Error(), "11 bytes") {
		t.Errorf("over the limit: error %v, want one naming 11 bytes", err)
	}
	// A long line is not read beyond the limit.
	cr := &countingReader{r: strings.NewReader(strings.Repeat("x", 1<<20))}
	if _, err := ReadFolded(cr, 100); err == nil || cr.n > 101 {
		t.Errorf("endless line: error %v after %d bytes", err, cr.n)
	}
	// Reading errors are wrapped.
	boom := errors.New("boom")
	_, err = ReadFolded(io.MultiReader(strings.NewReader("a 1\n"), errReader{boom}), 0)
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
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

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// errWriter fails every write with err.
type errWriter struct{ err error }

func (e errWriter) Write([]byte) (int, error) { return 0, e.err }

func TestWriteFolded(t *testing.T) {
	p := profileOf("b;g", 2, "a;f", 1, "a", 3, "c d;e", 4)
	var buf bytes.Buffer
	if err := p.WriteFolded(&buf); err != nil {
		t.Fatal(err)
	}
	want := "a 3\na;f 1\nb;g 2\nc d;e 4\n"
	if buf.String() != want {
		t.Errorf("WriteFolded:\n%s\nwant:\n%s", buf.String(), want)
	}
	q, err := ReadFolded(&buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Stacks, q.Stacks) {
		t.Errorf("round trip: %v, want %v", q.Stacks, p.Stacks)
	}
	boom := errors.New("boom")
	if err := p.WriteFolded(errWriter{boom}); !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
	}
	buf.Reset()
	if err := New().WriteFolded(&buf); err != nil || buf.Len() != 0 {
		t.Errorf("empty profile: %q, %v", buf.String(), err)
	}
}

func FuzzReadFolded(f *testing.F) {
	f.Add([]byte("sh;main;f 3\n\nsh;main;f 2\r\nWeb Content;a b 7\n"), uint16(0))
	f.Add([]byte("a 1\nb x\n"), uint16(5))
	f.Add([]byte("<script>;&amp; 9\n\x00;\xff 1\n;;; 2\n"), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, limit uint16) {
		p, err := ReadFolded(bytes.NewReader(data), int64(limit))
		if err != nil {
			if p != nil {
				t.Fatal("profile and error")
			}
			return
		}
		if limit > 0 && len(data) > int(limit) {
			t.Fatalf("read %d bytes, limit %d", len(data), limit)
		}
		for s, n := range p.Stacks {
			if s == "" || n <= 0 || strings.ContainsAny(s, "\n\r") {
				t.Fatalf("stack %q count %d", s, n)
			}
		}
		var buf bytes.Buffer
		if err := p.WriteFolded(&buf); err != nil {
			t.Fatal(err)
		}
		q, err := ReadFolded(&buf, 0)
		if err != nil {
			t.Fatalf("reading what WriteFolded wrote: %v", err)
		}
		if !reflect.DeepEqual(p.Stacks, q.Stacks) {
			t.Fatalf("round trip: %v, want %v", q.Stacks, p.Stacks)
		}
		p.Shares()
		buf.Reset()
		if err := Icicle(&buf, p, IcicleOptions{Title: string(data), MinFrac: 1e-9}); err != nil {
			t.Fatal(err)
		}
		checkXML(t, buf.Bytes())
	})
}

// benchProfile returns a profile of n stacks of depth 4 to 30 over a few
// hundred functions.
func benchProfile(n int) *Profile {
	p := New()
	seed := uint32(7)
	next := func() int {
		seed = seed*1664525 + 1013904223
		return int(seed >> 8)
	}
	for p.Total() >= 0 && len(p.Stacks) < n {
		var b strings.Builder
		fmt.Fprintf(&b, "comm%d", next()%8)
		depth := 4 + next()%27
		for d := range depth {
			fmt.Fprintf(&b, ";func_%d_%d", d, next()%(2+d))
		}
		p.Add(b.String(), int64(1+next()%100))
	}
	return p
}

func BenchmarkShares(b *testing.B) {
	p := benchProfile(4000)
	b.ReportAllocs()
	for b.Loop() {
		if len(p.Shares()) == 0 {
			b.Fatal("no shares")
		}
	}
}
