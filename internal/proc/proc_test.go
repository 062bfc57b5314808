package proc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRunOutput(t *testing.T) {
	out, err := Run(context.Background(), Opts{}, "sh", "-c", "echo out; echo err >&2")
	if err != nil || string(out) != "out\n" {
		t.Fatalf("Run = %q, %v", out, err)
	}
}

func TestRunExitError(t *testing.T) {
	_, err := Run(context.Background(), Opts{}, "sh", "-c", "echo why >&2; exit 3")
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %T %v is not *Error", err, err)
	}
	if pe.ExitCode != 3 || pe.TimedOut || !strings.Contains(pe.Output, "why") {
		t.Errorf("got %+v", pe)
	}
	if !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "why") {
		t.Errorf("message %q lacks the status or the output", err)
	}
}

func TestRunTimeoutKillsGroup(t *testing.T) {
	start := time.Now()
	// The grandchild holds the pipe: only a group kill ends this quickly.
	_, err := Run(context.Background(), Opts{Timeout: 200 * time.Millisecond}, "sh", "-c", "sleep 30 & sleep 30")
	var pe *Error
	if !errors.As(err, &pe) || !pe.TimedOut {
		t.Fatalf("want a timeout, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("timeout took %v", d)
	}
}

func TestRunMissingBinary(t *testing.T) {
	_, err := Run(context.Background(), Opts{}, "klab-no-such-binary")
	var pe *Error
	if !errors.As(err, &pe) || pe.ExitCode != -1 {
		t.Fatalf("got %v", err)
	}
}

func TestTailBuffer(t *testing.T) {
	var tb tailBuffer
	for i := 0; i < 5; i++ {
		tb.Write([]byte(strings.Repeat("x", keepTail)))
	}
	tb.Write([]byte("end"))
	s := tb.String()
	if len(s) != keepTail || !strings.HasSuffix(s, "end") {
		t.Errorf("tail of %d bytes, suffix %q", len(s), s[len(s)-3:])
	}
}
