package lab

import (
	"strings"
	"testing"

	"klab/guest/proto"
)

func TestTestFilter(t *testing.T) {
	st := proto.Step{ID: 4, Kind: proto.StepFstests, Fstests: &proto.FstestsStep{Tests: []string{"generic/013", "generic/184"}, MaxDetail: 16}}
	f := newTestFilter(st)
	good := &proto.TestResult{Step: 4, Name: "generic/013", Status: proto.TestFail, Seconds: -1,
		Reason: "bad\x1b[31m\nthing", Diff: strings.Repeat("d", 40), LogTail: strings.Repeat("x", 30) + "END"}
	if why := f.take(good); why != "" {
		t.Fatalf("take = %q", why)
	}
	if good.Reason != "bad[31m thing" || len(good.Diff) != 16 || !strings.HasSuffix(good.LogTail, "END") || len(good.LogTail) != 16 || good.Seconds != 0 {
		t.Errorf("cleaned = %+v", good)
	}
	for _, bad := range []proto.TestResult{
		{Step: 4, Name: "generic/013", Status: proto.TestPass},    // twice
		{Step: 5, Name: "generic/184", Status: proto.TestPass},    // another step
		{Step: 4, Name: "generic/999", Status: proto.TestPass},    // not asked for
		{Step: 4, Name: "generic/184", Status: proto.TestCrash},   // the host's status
		{Step: 4, Name: "generic/184", Status: "\x1b]0;evil\x07"}, // no status
	} {
		if why := f.take(&bad); why == "" {
			t.Errorf("take(%+v) kept it", bad)
		}
	}
	d := &proto.Done{XUnit: strings.Repeat("<", MaxXUnit+10)}
	boundXUnit(d)
	if len(d.XUnit) != MaxXUnit {
		t.Errorf("XUnit is %d bytes", len(d.XUnit))
	}
}
