package suite

import (
	"bufio"
	"os"
	"reflect"
	"strings"
	"testing"

	"klab/guest/proto"
)

// open opens a testdata file.
func open(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestParseXUnit(t *testing.T) {
	x, err := ParseXUnit(open(t, "result.xml"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if x.Section != "global" || x.Tests != 5 || x.Failures != 3 || x.Skipped != 1 || x.Seconds != 41 || x.Hostname != "klab-guest" {
		t.Errorf("suite = %+v", x)
	}
	if x.Properties["KERNEL"] != "6.12.43+deb13-amd64" || x.Properties["MOUNT_OPTIONS"] != "-o lazytime" {
		t.Errorf("properties = %v", x.Properties)
	}
	var got []string
	for _, c := range x.Cases {
		got = append(got, c.Name+" "+c.Status+" "+c.Reason)
	}
	want := []string{
		"generic/001 pass ",
		`generic/002 notrun this test requires a valid $SCRATCH_DEV & a "real" device`,
		"generic/003 fail output mismatch (see /var/lib/klab-fstests/results//generic/003.out.bad)",
		"generic/005 fail _check_dmesg: something found in dmesg (see /var/lib/klab-fstests/results//generic/005.dmesg) & more",
		"generic/006 fail [failed, exit status 1]- output mismatch (see /var/lib/klab-fstests/results//generic/006.out.bad)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cases:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	c := x.Cases[2]
	if c.Seconds != 4 || !strings.HasPrefix(c.Diff, "--- tests/generic/003.out") ||
		!strings.Contains(c.Diff, "+[31munexpected]]> line\n Silence is golden") || strings.ContainsRune(c.Diff, 0x1b) {
		t.Errorf("diff = %q", c.Diff)
	}
	if c.LogTail != "seed = 1736000000\nmkfs.ext4 -F /dev/ram1\n[   20.100000] run fstests generic/003 at 2025-01-02 03:04:20\n[   21.000000] EXT4-fs (ram1): mounted filesystem" {
		t.Errorf("log tail = %q", c.LogTail)
	}
}

func TestParseXUnitQuiet(t *testing.T) {
	x, err := ParseXUnit(open(t, "result-quiet.xml"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if x.Section != "fuse-klab" || x.Seconds != 0 || len(x.Cases) != 1 {
		t.Fatalf("suite = %+v", x)
	}
	if c := x.Cases[0]; c.Name != "generic/013" || c.Status != proto.TestFail || c.Seconds != 12 || c.Diff != "" || c.LogTail != "" {
		t.Errorf("case = %+v", c)
	}
}

func TestParseXUnitBad(t *testing.T) {
	for name, in := range map[string]string{
		"too large": strings.Repeat(" ", 200) + "<testsuite/>",
		"not xml":   "hello",
		"empty":     `<testsuite></testsuite>`,
		"bad name":  `<testsuite name="xfstests"><testcase name="../../etc" time="1"/></testsuite>`,
		"truncated": `<testsuite name="xfstests"><testcase name="generic/001" time="1">`,
	} {
		if _, err := ParseXUnit(strings.NewReader(in), 100); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseCheckLog(t *testing.T) {
	logs, err := ParseCheckLog(open(t, "check.log"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := []CheckLog{
		{Kernel: "6.12.43+deb13-amd64", Date: "Thu Jan 2 03:04:46 UTC 2025",
			Ran: []string{"generic/001", "generic/002", "generic/003", "generic/005"}, NotRun: []string{"generic/002"},
			Failures: []string{"generic/003", "generic/005"}},
		{Kernel: "6.13.0-klab", Date: "Thu Jan 2 04:00:00 UTC 2025", Ran: []string{"generic/001"}, Passed: true, Interrupted: true},
	}
	if !reflect.DeepEqual(logs, want) {
		t.Fatalf("ParseCheckLog = %+v\nwant %+v", logs, want)
	}
	var got []string
	for _, tt := range logs[0].Tests() {
		got = append(got, tt.Name+" "+tt.Status)
	}
	if w := []string{"generic/001 pass", "generic/002 notrun", "generic/003 fail", "generic/005 fail"}; !reflect.DeepEqual(got, w) {
		t.Errorf("Tests() = %v, want %v", got, w)
	}
}

func TestParseCheckTime(t *testing.T) {
	times, err := ParseCheckTime(open(t, "check.time"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if w := map[string]float64{"generic/001": 6, "generic/013": 249, "ext4/001": 30}; !reflect.DeepEqual(times, w) {
		t.Errorf("ParseCheckTime = %v, want %v", times, w)
	}
	if _, err := ParseCheckTime(strings.NewReader("generic/001 6\ngeneric/002 x\n"), 100); err == nil || !strings.Contains(err.Error(), "check.time:2") {
		t.Errorf("bad seconds: err = %v", err)
	}
}

// TestParseStatusLines reads a whole stdout of check: only the tests'
// status lines count.
func TestParseStatusLines(t *testing.T) {
	var got []string
	sc := bufio.NewScanner(open(t, "check.out"))
	for sc.Scan() {
		if name, status, sec, reason, ok := ParseStatusLine(sc.Text()); ok {
			got = append(got, strings.TrimSpace(name+" "+status+" "+fmtSeconds(sec)+" "+reason))
		}
	}
	want := []string{
		"generic/001 pass 6s",
		"generic/002 notrun 0s this test requires a valid $SCRATCH_DEV",
		"generic/003 fail 0s output mismatch (see /var/lib/klab-fstests/results//generic/003.out.bad)",
		"generic/005 fail 0s _check_dmesg: something found in dmesg (see /var/lib/klab-fstests/results//generic/005.dmesg)",
		"generic/006 fail 0s [failed, exit status 1]- output mismatch (see /var/lib/klab-fstests/results//generic/006.out.bad)",
		"generic/007 notrun 0s expunged",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("status lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestFromProtoBounds(t *testing.T) {
	tr := FromProto(proto.TestResult{Name: "generic/001", Status: proto.TestFail, Reason: "a\x1b[2Jb\nc",
		Diff: strings.Repeat("d\n", MaxDetail), LogTail: strings.Repeat("é", MaxDetail)})
	if tr.Reason != "a[2Jb c" || len(tr.Diff) > MaxDetail || len(tr.LogTail) > MaxDetail || !strings.HasSuffix(tr.LogTail, "é") {
		t.Errorf("FromProto = %q %d %d", tr.Reason, len(tr.Diff), len(tr.LogTail))
	}
	if !strings.HasPrefix(Tail("x\nyz", 3), "yz") || Head("ab\ncd", 4) != "ab\n" {
		t.Errorf("Head/Tail: %q %q", Tail("x\nyz", 3), Head("ab\ncd", 4))
	}
}
