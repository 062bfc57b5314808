package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/guest/proto"
)

func TestParseStatusLine(t *testing.T) {
	for _, c := range []struct {
		line string
		ok   bool
		want statusLine
	}{
		{"generic/184        4s", true, statusLine{Name: "generic/184", Status: proto.TestPass, Seconds: 4}},
		{"generic/184 3s ...  5s", true, statusLine{Name: "generic/184", Status: proto.TestPass, Seconds: 5}},
		{"generic/236       [not run] this test requires a valid $SCRATCH_DEV", true,
			statusLine{Name: "generic/236", Status: proto.TestNotRun, Reason: "this test requires a valid $SCRATCH_DEV"}},
		{"generic/013        - output mismatch (see /var/lib/klab-fstests/results//generic/013.out.bad)", true,
			statusLine{Name: "generic/013", Status: proto.TestFail, Reason: "- output mismatch (see /var/lib/klab-fstests/results//generic/013.out.bad)"}},
		{"generic/013        [failed, exit status 1]- output mismatch (see x)", true,
			statusLine{Name: "generic/013", Status: proto.TestFail, Reason: "[failed, exit status 1]- output mismatch (see x)"}},
		{"generic/013        _check_dmesg: something found in dmesg (see r/generic/013.dmesg)", true,
			statusLine{Name: "generic/013", Status: proto.TestFail, Reason: "_check_dmesg: something found in dmesg (see r/generic/013.dmesg)"}},
		{"generic/999 - no such test?", true, statusLine{Name: "generic/999", Status: proto.TestNotRun, Reason: "no such test"}},
		{"generic/001       [expunged]", true, statusLine{Name: "generic/001", Status: proto.TestNotRun, Reason: "expunged"}},
		{"generic/100", true, statusLine{Name: "generic/100", Status: proto.TestFail, Reason: "failed without a message"}},
		{"FSTYP         -- ext4", false, statusLine{}},
		{"PLATFORM      -- Linux/x86_64 klab 6.12.0", false, statusLine{}},
		{"MKFS_OPTIONS  -- /dev/ram1", false, statusLine{}},
		{"    --- tests/generic/013.out	2024-01-01", false, statusLine{}},
		{"Ran: generic/184 generic/236", false, statusLine{}},
		{"", false, statusLine{}},
	} {
		got, ok := parseStatusLine(c.line)
		if ok != c.ok || got != c.want {
			t.Errorf("parseStatusLine(%q) = %+v, %v; want %+v, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

func TestCheckSummary(t *testing.T) {
	for line, want := range map[string]bool{
		"Ran: generic/184": true, "Not run: generic/236": true, "Failures: generic/013": true,
		"Failed 1 of 2 tests": true, "Passed all 2 tests": true, "generic/184 4s": false, "SECTION -- ext4": false,
	} {
		if got := checkSummary(line); got != want {
			t.Errorf("checkSummary(%q) = %v", line, got)
		}
	}
}

func TestKmsgMarker(t *testing.T) {
	for rec, want := range map[string]string{
		"12,812,1234567,-;run fstests generic/013 at 2024-01-02 03:04:05\n": "generic/013",
		"run fstests ext4/001 at 2024-01-02 03:04:05":                       "ext4/001",
		"6,1,2,-;run fstests generic/013\n":                                 "",
		"6,1,2,-;EXT4-fs (ram0): mounted filesystem\n":                      "",
		"6,1,2,-;run fstests ../../x at now\n":                              "",
		"6,1,2,-;run xfstest generic/013\n SUBSYSTEM=x\n":                   "",
	} {
		got, ok := kmsgMarker(rec)
		if got != want || ok != (want != "") {
			t.Errorf("kmsgMarker(%q) = %q, %v; want %q", rec, got, ok, want)
		}
	}
}

func TestExt4LocalConfig(t *testing.T) {
	c := &proto.FstestsConfig{Name: "ext4-lazytime", FSType: proto.FstestsExt4, MkfsOptions: "-I 256 -b 4096", MountOptions: "lazytime,noload"}
	got := renderLocalConfig(ext4LocalConfig(c, "/dev/ram0", "/dev/ram1"))
	want := `# written by klab's agent for this run
export FSTYP=ext4
export TEST_DEV=/dev/ram0
export TEST_DIR=/mnt/test
export SCRATCH_DEV=/dev/ram1
export SCRATCH_MNT=/mnt/scratch
export MKFS_OPTIONS='-I 256 -b 4096'
export MOUNT_OPTIONS='-o lazytime,noload'
`
	if got != want {
		t.Errorf("local.config:\n%s\nwant:\n%s", got, want)
	}
	plain := renderLocalConfig(ext4LocalConfig(&proto.FstestsConfig{FSType: proto.FstestsExt4}, "/dev/ram0", "/dev/ram1"))
	if strings.Contains(plain, "OPTIONS") {
		t.Errorf("options without any configured:\n%s", plain)
	}
	if q := shellQuote(`it's $(x)`); q != `'it'\''s $(x)'` {
		t.Errorf("shellQuote = %s", q)
	}
}

func TestValidEnv(t *testing.T) {
	if err := validEnv([]string{"SOAK_DURATION=10", "LOAD_FACTOR=1", "X="}); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"NOEQUALS", "1X=2", "A B=c", "=v"} {
		if validEnv([]string{bad}) == nil {
			t.Errorf("validEnv(%q) = nil", bad)
		}
	}
}

func TestBoundedDetail(t *testing.T) {
	s := strings.Repeat("line\n", 100)
	if h := headBytes(s, 23); !strings.HasPrefix(h, "line\nline\nline\nline\n[... ") {
		t.Errorf("headBytes = %q", h)
	}
	if tl := tailBytes(s, 23); !strings.HasSuffix(tl, "bytes before]\nline\nline\nline\nline\n") {
		t.Errorf("tailBytes = %q", tl)
	}
	if headBytes("short", 10) != "short" || tailBytes("short", 10) != "short" {
		t.Error("short strings changed")
	}
}

// TestFstestsRunReports feeds check's output through the step's collector
// and reads the KindTest messages it sends: a pass, a notrun whose reason
// is in its .notrun file, and a failure held until the next test starts,
// with its printed diff and the tail of its .full log.
func TestFstestsRunReports(t *testing.T) {
	results := t.TempDir()
	if err := os.MkdirAll(filepath.Join(results, "generic"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"generic/013.full": "fsstress said\n", "generic/236.notrun": "needs a scratch device\n"} {
		if err := os.WriteFile(filepath.Join(results, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	a := &Agent{In: strings.NewReader(""), Out: &out}
	f := &proto.FstestsStep{Tests: []string{"generic/184", "generic/013", "generic/236"}}
	r := &fstestsRun{a: a, step: 7, f: f, results: results, maxDetail: 1024, reported: map[string]bool{}, lastEnd: time.Now()}
	for _, l := range []string{
		"FSTYP         -- ext4",
		"generic/184        1s",
		"generic/013        - output mismatch (see results/generic/013.out.bad)",
		"    --- tests/generic/013.out",
		"    +++ results/generic/013.out.bad",
		"    -ok",
		"    +broken",
		"generic/236       [not run] ",
		"Ran: generic/184 generic/013 generic/236",
	} {
		r.line(l)
	}
	r.flush()
	dec := proto.NewDecoder(&out)
	var got []proto.TestResult
	for {
		m, err := dec.Decode()
		if err != nil {
			break
		}
		if m.Kind == proto.KindTest {
			got = append(got, *m.Test)
		}
	}
	if len(got) != 3 {
		t.Fatalf("got %d results: %+v", len(got), got)
	}
	if got[0].Name != "generic/184" || got[0].Status != proto.TestPass || got[0].Step != 7 {
		t.Errorf("first = %+v", got[0])
	}
	if g := got[1]; g.Name != "generic/013" || g.Status != proto.TestFail || !strings.Contains(g.Diff, "-ok\n+broken\n") ||
		!strings.Contains(g.LogTail, "fsstress said") || !strings.Contains(g.Reason, "output mismatch") {
		t.Errorf("second = %+v", g)
	}
	if g := got[2]; g.Name != "generic/236" || g.Status != proto.TestNotRun || g.Reason != "needs a scratch device" {
		t.Errorf("third = %+v", g)
	}
}
