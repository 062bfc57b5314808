package check

import (
	"strings"
	"testing"
	"time"

	"klab/guest/fuse/dispatch"
)

// TestGradeInterrupt feeds the interrupt check's grading measurements
// that are right for a policy, and each way of being wrong, without a
// mount: every wrong one must give the problem that names it, and the
// right ones none.
func TestGradeInterrupt(t *testing.T) {
	const hold = time.Second
	cancelled := func(n int) CallDetails {
		return CallDetails{Name: "held1", Err: "EINTR", Elapsed: 10 * time.Millisecond, Held: 5 * time.Millisecond, Interrupts: n, Cancelled: true}
	}
	served := func(name string, n int) CallDetails {
		return CallDetails{Name: name, Err: "ok", Elapsed: hold + time.Millisecond, Held: hold, Interrupts: n}
	}
	// A loaded host: the call was cancelled while held, but reached the
	// client long after the hold. That is no failure.
	slowCancel := cancelled(1)
	slowCancel.Elapsed = 3 * hold
	type change func(*InterruptDetails)
	for _, c := range []struct {
		name   string
		policy string
		uring  bool
		calls  []CallDetails
		conn   dispatch.Stats
		change change
		want   string // "" for no problem
	}{
		{name: "cancel ok", policy: "cancel", calls: []CallDetails{cancelled(1)}},
		{name: "cancel ok on a loaded host", policy: "cancel", calls: []CallDetails{slowCancel}},
		{name: "cancel served after the hold", policy: "cancel", calls: []CallDetails{served("held1", 1)}, want: "returned ok, want EINTR"},
		{name: "cancel EINTR not from the server", policy: "cancel",
			change: func(d *InterruptDetails) { d.Calls[0].Cancelled = false }, calls: []CallDetails{cancelled(1)}, want: "did not cancel"},
		{name: "cancel interrupted twice", policy: "cancel", calls: []CallDetails{cancelled(2)}, want: "got 2 interrupts for the call, want 1"},
		{name: "eagain:2 ok", policy: "eagain:2", calls: []CallDetails{cancelled(3)}},
		{name: "eagain:2 not requeued", policy: "eagain:2", calls: []CallDetails{cancelled(1)}, want: "got 1 interrupts for the call, want 3"},
		{name: "ignore ok", policy: "ignore", calls: []CallDetails{served("held1", 1)}},
		{name: "ignore cancelled", policy: "ignore", calls: []CallDetails{cancelled(1)}, want: "returned EINTR, want success"},
		{name: "ignore before the hold", policy: "ignore", calls: []CallDetails{served("held1", 1)},
			change: func(d *InterruptDetails) { d.Calls[0].Elapsed = hold / 2 }, want: "want at least the 1.0s hold"},
		{name: "ignore no interrupt", policy: "ignore", calls: []CallDetails{served("held1", 0)}, want: "got 0 interrupts for the call, want 1"},
		{name: "enosys ok", policy: "enosys", calls: []CallDetails{served("held1", 1), served("held2", 0)}, conn: dispatch.Stats{InterruptsENOSYS: 1}},
		{name: "enosys not sticky", policy: "enosys", calls: []CallDetails{served("held1", 1), served("held2", 1)}, conn: dispatch.Stats{InterruptsENOSYS: 1},
			want: "after ENOSYS the server still got 1 interrupt(s)"},
		{name: "enosys never answered", policy: "enosys", calls: []CallDetails{served("held1", 1), served("held2", 0)}, want: "answered 0 interrupts with ENOSYS"},
		{name: "enosys one call", policy: "enosys", calls: []CallDetails{served("held1", 1)}, want: "too few"},
		{name: "no calls", policy: "cancel", want: "too few"},

		{name: "uring cancel ok", policy: "cancel", uring: true, calls: []CallDetails{cancelled(1)}},
		{name: "uring cancel served", policy: "cancel", uring: true, calls: []CallDetails{served("held1", 1)}, want: "want EINTR from the server"},
		{name: "uring eagain ok", policy: "eagain:1", uring: true, calls: []CallDetails{served("held1", 1)},
			conn: dispatch.Stats{InterruptsEAGAIN: 1, ReplyENOENT: 1}},
		{name: "uring eagain requeued", policy: "eagain:1", uring: true, calls: []CallDetails{served("held1", 2)},
			conn: dispatch.Stats{InterruptsEAGAIN: 1, ReplyENOENT: 1}, want: "got 2 interrupts for the call, want 1"},
		{name: "uring reply accepted", policy: "eagain:1", uring: true, calls: []CallDetails{served("held1", 1)},
			conn: dispatch.Stats{InterruptsEAGAIN: 1}, want: "1 interrupt replies were sent and 0 failed with ENOENT"},
		{name: "uring enosys ok", policy: "enosys", uring: true, calls: []CallDetails{served("held1", 1), served("held2", 1)},
			conn: dispatch.Stats{InterruptsENOSYS: 2, ReplyENOENT: 2}},
		{name: "uring enosys sticky", policy: "enosys", uring: true, calls: []CallDetails{served("held1", 1), served("held2", 0)},
			conn: dispatch.Stats{InterruptsENOSYS: 1, ReplyENOENT: 1}, want: "the second call got 0 interrupt(s), want 1"},
		{name: "uring ignore early", policy: "ignore", uring: true, calls: []CallDetails{served("held1", 1)},
			change: func(d *InterruptDetails) { d.Calls[0].Elapsed = hold - time.Millisecond }, want: "want success after the 1.0s hold"},
	} {
		t.Run(c.name, func(t *testing.T) {
			policy, err := dispatch.ParseInterruptPolicy(c.policy)
			if err != nil {
				t.Fatal(err)
			}
			d := &InterruptDetails{Policy: policy.String(), Hold: hold, Calls: append([]CallDetails(nil), c.calls...), Conn: c.conn}
			if c.change != nil {
				c.change(d)
			}
			problems := gradeInterrupt(policy, c.uring, d)
			if c.want == "" {
				if len(problems) != 0 {
					t.Errorf("problems %q, want none", problems)
				}
				return
			}
			found := false
			for _, p := range problems {
				found = found || strings.Contains(p, c.want)
			}
			if !found {
				t.Errorf("problems %q, want one with %q", problems, c.want)
			}
		})
	}
}
