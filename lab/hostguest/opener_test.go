package hostguest

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"klab/guest/agent"
	"klab/guest/proto"
	"klab/lab"
	"klab/results"
)

// started is what a fake start was given.
type started struct {
	root    string
	libfuse map[string]string
}

// fakeStart runs an agent with handlers in this process, as the child
// would, and records what it was given in got.
func fakeStart(handlers map[proto.StepKind]agent.Handler, got *started) func(context.Context, string, map[string]string, io.Writer) (*child, error) {
	return func(_ context.Context, root string, libfuse map[string]string, _ io.Writer) (*child, error) {
		if got != nil {
			*got = started{root, libfuse}
		}
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			return nil, errors.New("no private root directory")
		}
		host, guest := net.Pipe()
		exited := make(chan struct{})
		a := &agent.Agent{In: guest, Out: guest, Handlers: handlers}
		go func() {
			defer close(exited)
			defer guest.Close()
			if a.SendHello(agent.NewHello(channelName, nil)) == nil {
				_ = a.Serve(context.Background())
			}
		}()
		return &child{conn: host, exited: exited, err: func() error { return nil }, kill: func() { guest.Close() }}, nil
	}
}

func newTestOpener(t *testing.T, f Facts, handlers map[proto.StepKind]agent.Handler, got *started) *Opener {
	o := &Opener{CacheDir: t.TempDir(), RunsDir: t.TempDir(), Facts: &f, start: fakeStart(handlers, got),
		Libfuse: func(_ context.Context, kinds []string) (map[string]string, error) {
			m := map[string]string{}
			for _, k := range kinds {
				m[k] = "/cache/" + k
			}
			return m, nil
		}}
	return o
}

func TestOpenRefusesWithoutRunning(t *testing.T) {
	o := newTestOpener(t, Facts{FUSEURing: "Y"}, nil, nil)
	o.start = func(context.Context, string, map[string]string, io.Writer) (*child, error) {
		t.Fatal("the agent was started")
		return nil, nil
	}
	_, err := o.Open(context.Background(), lab.BootRequest{Kernel: Ref})
	if !errors.Is(err, ErrNotRoot) {
		t.Fatalf("Open as another user: %v, want ErrNotRoot", err)
	}
	if ents, _ := os.ReadDir(o.RunsDir); len(ents) != 0 {
		t.Errorf("a refused run left %d entries in the runs directory", len(ents))
	}
	if _, err := o.Open(context.Background(), lab.BootRequest{Kernel: "debian:7.3"}); err == nil || !strings.Contains(err.Error(), "host's own kernel") {
		t.Errorf("Open of a guest kernel: %v", err)
	}
}

func TestHostGuestRunsSteps(t *testing.T) {
	handlers := map[proto.StepKind]agent.Handler{
		proto.StepWorkload: func(_ context.Context, a *agent.Agent, s *proto.Step) proto.Done {
			if s.Workload.Name == "bad" {
				return proto.Done{ExitCode: 1, Error: "broken"}
			}
			_ = a.Send(&proto.Message{Kind: proto.KindSample, Sample: &proto.Sample{Step: s.ID, Ops: 5}})
			return proto.Done{Metrics: &proto.Metrics{Ops: 10, Bytes: 4096}}
		},
	}
	var got started
	o := newTestOpener(t, Facts{Root: true, FUSEURing: "Y"}, handlers, &got)
	hp := fuseStep("uring", &proto.Step{Kind: proto.StepWorkload, Workload: &proto.WorkloadStep{Name: "x"}})
	hp.FUSE.Server = proto.FUSELibfusePassthroughHP
	g, err := o.Open(context.Background(), lab.BootRequest{Kernel: Ref, Prepare: []proto.Step{hp}})
	if err != nil {
		t.Fatal(err)
	}
	if got.libfuse[proto.FUSELibfusePassthroughHP] != "/cache/"+proto.FUSELibfusePassthroughHP || len(got.libfuse) != 1 {
		t.Errorf("libfuse servers given to the agent: %v", got.libfuse)
	}
	out, err := g.Run(context.Background(), []proto.Step{
		{ID: 7, Kind: proto.StepExec, Argv: []string{"true"}},
		{ID: 8, Kind: proto.StepWorkload, Workload: &proto.WorkloadStep{Name: "good"}},
	})
	if err != nil || len(out) != 2 || out[1].Step.ID != 8 || out[1].Done.Metrics == nil || out[1].Done.Metrics.Ops != 10 {
		t.Fatalf("Run: %+v, %v", out, err)
	}
	_, err = g.Run(context.Background(), []proto.Step{{ID: 9, Kind: proto.StepWorkload, Workload: &proto.WorkloadStep{Name: "bad"}}})
	var se *lab.StepError
	if !errors.As(err, &se) {
		t.Fatalf("a failed workload: %v, want a *lab.StepError", err)
	}
	if _, err := g.Run(context.Background(), []proto.Step{{Kind: proto.StepSysctl, Key: "vm.x", Value: "1"}}); err == nil || !strings.Contains(err.Error(), "sysctl vm.x") {
		t.Errorf("a sysctl step ran: %v", err)
	}
	res, err := g.Close()
	if err != nil {
		t.Fatal(err)
	}
	m, err := results.ReadManifest(res.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Accel != results.AccelHost || m.Kernel.Source != Source || m.Kernel.Name != Ref || m.Outcome.Status != results.StatusStepFailed {
		t.Errorf("manifest: accel %q, kernel %+v, outcome %+v", m.Accel, m.Kernel, m.Outcome)
	}
	if _, err := os.Stat(got.root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the private root %s is left: %v", got.root, err)
	}
}
