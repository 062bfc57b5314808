package agent

import (
	"context"
	"sync"
	"time"

	"klab/guest/proto"
	"klab/guest/workload"
)

// stepContext bounds ctx by the step's TimeoutMs, when it has one.
func stepContext(ctx context.Context, s *proto.Step) (context.Context, context.CancelFunc) {
	if s.TimeoutMs > 0 {
		return context.WithTimeout(ctx, time.Duration(s.TimeoutMs)*time.Millisecond)
	}
	return context.WithCancel(ctx)
}

// sampleSender returns a function that streams a workload's samples to the
// host as Sample messages of step id. Send errors are dropped: the step's
// Done reports the outcome, and a dead channel ends Serve anyway.
func (a *Agent) sampleSender(id int) func(proto.Sample) {
	return func(smp proto.Sample) {
		smp.Step = id
		_ = a.Send(&proto.Message{Kind: proto.KindSample, Sample: &smp})
	}
}

// RunWorkloadStep is the Handler of proto.StepWorkload: it runs the Go I/O
// engine (guest/workload) for s.Workload in a child process (see
// runWorkloadChild), streams its samples while it runs, and returns its
// Metrics in the Done. A failed or invalid workload is exit code 1 with the
// error, and whatever metrics were measured.
func RunWorkloadStep(ctx context.Context, a *Agent, s *proto.Step) proto.Done {
	if s.Workload == nil {
		return proto.Done{ExitCode: -1, Error: "workload step without its workload"}
	}
	if err := workload.Validate(s.Workload); err != nil {
		return proto.Done{ExitCode: 1, Error: err.Error()}
	}
	ctx, cancel := stepContext(ctx, s)
	defer cancel()
	m, err := runWorkloadChild(ctx, s.Workload, a.sampleSender(s.ID))
	d := proto.Done{Metrics: m}
	if err != nil {
		d.ExitCode = 1
		d.Error = err.Error()
	}
	return d
}

// RunFioStep is the Handler of proto.StepFio: it runs fio (found in the
// agent's PATH unless the step names it) with JSON output, streams a
// sample per status report and fio's stderr as Output, and returns the
// mapped Metrics in the Done.
func RunFioStep(ctx context.Context, a *Agent, s *proto.Step) proto.Done {
	if s.Fio == nil {
		return proto.Done{ExitCode: -1, Error: "fio step without its fio job"}
	}
	ctx, cancel := stepContext(ctx, s)
	defer cancel()
	f := *s.Fio
	env := a.execEnv(nil)
	if f.Binary == "" {
		p, err := lookPath("fio", envValue(env, "PATH"))
		if err != nil {
			return proto.Done{ExitCode: -1, Error: "fio is not in the guest: boot with fio in the initramfs (a fio step in lab.BootRequest.Steps adds it): " + err.Error()}
		}
		f.Binary = p
	}
	stderr := &outputWriter{a: a, step: s.ID, stream: proto.Stderr}
	m, err := workload.RunFio(ctx, &f, workload.FioOptions{OnSample: a.sampleSender(s.ID), Stderr: stderr, Env: env})
	d := proto.Done{Metrics: m}
	if err != nil {
		d.ExitCode = 1
		d.Error = err.Error()
	}
	return d
}

// outputWriter sends what is written to it as Output messages of one step
// and stream, in chunks of at most proto.MaxChunk bytes.
type outputWriter struct {
	a      *Agent
	step   int
	stream proto.Stream
	mu     sync.Mutex // serialises Write
}

// Write sends p as one or more Output messages.
func (w *outputWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for off := 0; off < len(p); off += proto.MaxChunk {
		end := min(off+proto.MaxChunk, len(p))
		if err := w.a.Send(&proto.Message{Kind: proto.KindOutput, Output: &proto.Output{Step: w.step, Stream: w.stream, Data: p[off:end]}}); err != nil {
			return off, err
		}
	}
	return len(p), nil
}
