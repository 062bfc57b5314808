package lab

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"klab/guest/proto"
	"klab/results"
	"klab/results/splat"
)

func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{&KernelError{Status: "kernel-panic"}, ExitKernel},
		{fmt.Errorf("boot: %w", &KernelError{}), ExitKernel},
		{&StepError{Msg: "x"}, 1},
		{errors.New("apt failed"), ExitInfra},
	} {
		if got := ExitCode(c.err); got != c.want {
			t.Errorf("ExitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if ExitTimeout == ExitKernel || ExitKernel == ExitInfra || ExitNotRun == ExitKernel {
		t.Error("exit statuses collide")
	}
}

func TestKernelErrorMessage(t *testing.T) {
	e := &KernelError{Msg: "kernel panic: x", Console: []string{"a", "b"}, RunDir: "/r"}
	want := "kernel panic: x\nlast console lines:\n  | a\n  | b\nrun saved to /r"
	if e.Error() != want {
		t.Errorf("got %q", e.Error())
	}
}

func TestBlockedTasks(t *testing.T) {
	dump := "[ 1.0] sysrq: Show State\n[ 1.1] task:a\n[ 2.0] sysrq: Show Blocked State\n[ 2.1] task:uinit state:T\n[ 2.2] Call Trace:\n"
	got := blockedTasks(dump, 2, nil)
	if !slices.Equal(got, []string{"[ 2.0] sysrq: Show Blocked State", "[ 2.1] task:uinit state:T"}) {
		t.Errorf("got %q", got)
	}
	if got := blockedTasks("", 5, []string{"fallback"}); !slices.Equal(got, []string{"fallback"}) {
		t.Errorf("empty dump: %q", got)
	}
	if got := blockedTasks("x\ny\nz", 2, nil); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("no section: %q", got)
	}
}

func TestWatch(t *testing.T) {
	// The watch runs on a fake clock, so the silences are exact.
	now := time.Unix(1000, 0)
	w := newWatchClock(func() time.Time { return now })
	w.console("before")
	now = now.Add(20 * time.Millisecond)
	if got := w.silence(); got != 20*time.Millisecond {
		t.Errorf("silence %v after 20ms without a word, want 20ms", got)
	}
	w.touch()
	now = now.Add(time.Millisecond)
	if got := w.silence(); got != time.Millisecond {
		t.Errorf("silence %v 1ms after a touch, want 1ms", got)
	}
	now = now.Add(time.Second)
	w.console("line")
	if got := w.silence(); got != 0 {
		t.Errorf("silence %v right after a console line, want 0", got)
	}
	w.startCapture()
	w.console("one")
	w.console("two")
	if got := w.stopCapture(); got != "one\ntwo\n" {
		t.Errorf("captured %q", got)
	}
	w.console("after")
	if got := w.stopCapture(); got != "" {
		t.Errorf("captured after stop: %q", got)
	}
}

func TestStepMetrics(t *testing.T) {
	m := &proto.Metrics{}
	got := stepMetrics([]StepResult{
		{Step: proto.Step{Kind: proto.StepSysctl}},
		{Step: proto.Step{Kind: proto.StepWorkload}, Done: proto.Done{Metrics: m}},
	})
	if len(got) != 1 || got[0].Index != 1 || got[0].Kind != proto.StepWorkload || got[0].Metrics != m {
		t.Errorf("got %+v", got)
	}
}

func TestScale(t *testing.T) {
	if got := scale(0, 30*time.Second, 4); got != 2*time.Minute {
		t.Errorf("default scaled: %v", got)
	}
	if got := scale(time.Second, 30*time.Second, 1); got != time.Second {
		t.Errorf("given: %v", got)
	}
}

func TestPolicyVerdict(t *testing.T) {
	warn := splat.Report{Type: splat.TypeWarning, Title: "WARNING in fuse_uring_cmd", Text: "WARNING: ...\nCall Trace:\n"}
	bug := splat.Report{Type: splat.TypeBug, Title: "BUG: sleeping function called from invalid context in foo", Text: "BUG: sleeping\n"}
	man := &results.Manifest{Outcome: results.NewOutcome(results.StatusOK, "", 0)}
	if err := policyVerdict(nil, nil, man); err != nil {
		t.Fatalf("no reports: %v", err)
	}
	err := policyVerdict(nil, []splat.Report{warn, bug}, man)
	var ke *KernelError
	if !errors.As(err, &ke) || man.Outcome.Status != results.StatusKernelError || !strings.Contains(ke.Msg, "2 failing") {
		t.Fatalf("default policy: %v, outcome %+v", err, man.Outcome)
	}
	if len(ke.Console) == 0 || ke.Console[0] != "WARNING: ..." {
		t.Errorf("excerpt %q", ke.Console)
	}
	allow, err := splat.NewPolicy(splat.PolicyConfig{Allow: []string{"fuse_uring_cmd"}})
	if err != nil {
		t.Fatal(err)
	}
	man = &results.Manifest{}
	if err := policyVerdict(allow, []splat.Report{warn}, man); err != nil {
		t.Errorf("allowed warning failed the run: %v", err)
	}
}
