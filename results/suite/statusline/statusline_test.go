package statusline

import (
	"testing"

	"klab/guest/proto"
)

// The lines below are in the form check's main loop prints them: the
// name padded by printf "%-*s", the previous time from check.time
// (" 5s ... ") or seven spaces, then the outcome (_dump_err,
// _dump_err_cont, the .notrun file, or " Ns").
func TestParse(t *testing.T) {
	for _, c := range []struct {
		line, name, status string
		sec                float64
		reason             string
		ok                 bool
	}{
		{"generic/001 5s ...  6s", "generic/001", proto.TestPass, 6, "", true},
		{"generic/001        6s\n", "generic/001", proto.TestPass, 6, "", true},
		{"generic/002       [not run] this test requires a valid $SCRATCH_DEV", "generic/002", proto.TestNotRun, 0, "this test requires a valid $SCRATCH_DEV", true},
		{"generic/003 4s ... - output mismatch (see /r/generic/003.out.bad)", "generic/003", proto.TestFail, 0, "output mismatch (see /r/generic/003.out.bad)", true},
		{"generic/004       [failed, exit status 1]- output mismatch (see /r/generic/004.out.bad)", "generic/004", proto.TestFail, 0, "[failed, exit status 1]- output mismatch (see /r/generic/004.out.bad)", true},
		{"generic/005 3s ... _check_dmesg: something found in dmesg (see /r/generic/005.dmesg)", "generic/005", proto.TestFail, 0, "_check_dmesg: something found in dmesg (see /r/generic/005.dmesg)", true},
		{"generic/006       [expunged]", "generic/006", proto.TestNotRun, 0, "expunged", true},
		{"generic/007 - no such test?", "generic/007", proto.TestNotRun, 0, "no such test", true},
		{"generic/008 [12:00:00] [12:00:07] 7s", "generic/008", proto.TestPass, 7, "", true},
		{"ext4/001-name 1s ...  2s", "ext4/001-name", proto.TestPass, 2, "", true},
		{"generic/009 5s ... ", "", "", 0, "", false},
		{"generic/009       ", "", "", 0, "", false},
		{"Ran: generic/001 generic/002", "", "", 0, "", false},
		{"    --- tests/generic/003.out", "", "", 0, "", false},
		{"SECTION       -- ext4", "", "", 0, "", false},
		{"generic/01 3s", "", "", 0, "", false},
		{"generic/010 something else", "", "", 0, "", false},
		{"generic/011 99999999999s", "", "", 0, "", false},
		{"", "", "", 0, "", false},
	} {
		name, status, sec, reason, ok := Parse(c.line)
		if name != c.name || status != c.status || sec != c.sec || reason != c.reason || ok != c.ok {
			t.Errorf("Parse(%q) = %q, %q, %v, %q, %v; want %q, %q, %v, %q, %v", c.line,
				name, status, sec, reason, ok, c.name, c.status, c.sec, c.reason, c.ok)
		}
	}
}

func TestParseAllocatesNothing(t *testing.T) {
	n := testing.AllocsPerRun(100, func() {
		Parse("generic/003 4s ... - output mismatch (see /r/generic/003.out.bad)")
		Parse("generic/001 5s ...  6s")
	})
	if n != 0 {
		t.Errorf("Parse allocates %v times per call, want 0", n)
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{
		"generic/013": true, "ext4/001": true, "xfs/123-name": true, "generic/1234": true,
		"generic/01": false, "generic": false, "/013": false, "Generic/013": false,
		"generic/013 ": false, "generic/abc": false, "a/b/013": false,
	} {
		if got := ValidName(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("generic/001 5s ...  6s")
	f.Add("generic/002       [not run] reason")
	f.Fuzz(func(t *testing.T, line string) {
		name, status, _, _, ok := Parse(line)
		if ok && (!ValidName(name) || status == "") {
			t.Errorf("Parse(%q) = %q, %q, ok", line, name, status)
		}
	})
}
