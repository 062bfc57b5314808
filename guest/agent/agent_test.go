package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/guest/proto"
)

// host is the test's side of an Agent served over two pipes.
type host struct {
	t      *testing.T
	toA    *io.PipeWriter
	fromA  *io.PipeReader
	enc    *proto.Encoder
	msgs   chan *proto.Message
	served chan error
	cancel context.CancelFunc
}

func startAgent(t *testing.T, a *Agent) *host {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a.In, a.Out = inR, outW
	ctx, cancel := context.WithCancel(context.Background())
	h := &host{
		t: t, toA: inW, fromA: outR, enc: proto.NewEncoder(inW),
		msgs: make(chan *proto.Message, 1024), served: make(chan error, 1), cancel: cancel,
	}
	go func() {
		err := a.Serve(ctx)
		outW.Close()
		h.served <- err
	}()
	go func() {
		dec := proto.NewDecoder(outR)
		defer close(h.msgs)
		for {
			m, err := dec.Decode()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
					t.Errorf("host decode: %v", err)
				}
				return
			}
			h.msgs <- m
		}
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		outR.Close()
	})
	return h
}

func (h *host) send(m *proto.Message) {
	h.t.Helper()
	if err := h.enc.Encode(m); err != nil {
		h.t.Fatalf("send: %v", err)
	}
}

func (h *host) step(s proto.Step) {
	h.t.Helper()
	h.send(&proto.Message{Kind: proto.KindStep, Step: &s})
}

func (h *host) next(timeout time.Duration) *proto.Message {
	h.t.Helper()
	select {
	case m, ok := <-h.msgs:
		if !ok {
			h.t.Fatal("agent closed its channel")
		}
		return m
	case <-time.After(timeout):
		h.t.Fatal("timed out waiting for a message from the agent")
	}
	return nil
}

// until collects messages until the Done of step id, which it returns
// along with everything before it.
func (h *host) until(id int, timeout time.Duration) ([]*proto.Message, *proto.Done) {
	h.t.Helper()
	var before []*proto.Message
	deadline := time.Now().Add(timeout)
	for {
		m := h.next(time.Until(deadline))
		if m.Kind == proto.KindDone {
			if m.Done.Step != id {
				h.t.Fatalf("Done for step %d, want %d", m.Done.Step, id)
			}
			return before, m.Done
		}
		before = append(before, m)
	}
}

func describe(ms []*proto.Message) string {
	var b strings.Builder
	for _, m := range ms {
		switch m.Kind {
		case proto.KindOutput:
			b.WriteString("output " + string(m.Output.Stream) + " " + string(m.Output.Data) + "|")
		case proto.KindLog:
			b.WriteString("log " + m.Log.Msg + "|")
		default:
			b.WriteString(string(m.Kind) + "|")
		}
	}
	return b.String()
}

func checkDone(t *testing.T, d *proto.Done, id, code int, errPrefix string) {
	t.Helper()
	if d.Step != id || d.ExitCode != code || !strings.HasPrefix(d.Error, errPrefix) || (errPrefix == "" && d.Error != "") {
		t.Errorf("Done = %+v, want step %d exit %d error %q...", *d, id, code, errPrefix)
	}
	if d.DurationNs <= 0 {
		t.Errorf("Done.DurationNs = %d, want > 0", d.DurationNs)
	}
}

func TestExecEcho(t *testing.T) {
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"echo", "hi"}})
	before, d := h.until(1, 10*time.Second)
	if got, want := describe(before), "output stdout hi\n|"; got != want {
		t.Errorf("messages = %q, want %q", got, want)
	}
	if before[0].Output.Step != 1 {
		t.Errorf("Output.Step = %d, want 1", before[0].Output.Step)
	}
	checkDone(t, d, 1, 0, "")
}

func TestExecStderrExitCode(t *testing.T) {
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 2, Kind: proto.StepExec, Argv: []string{"sh", "-c", "echo err >&2; exit 3"}})
	before, d := h.until(2, 10*time.Second)
	if got, want := describe(before), "output stderr err\n|"; got != want {
		t.Errorf("messages = %q, want %q", got, want)
	}
	checkDone(t, d, 2, 3, "")
}

func TestExecTimeout(t *testing.T) {
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 3, Kind: proto.StepExec, Argv: []string{"sleep", "10"}, TimeoutMs: 200})
	before, d := h.until(3, 30*time.Second)
	if len(before) != 0 {
		t.Errorf("messages before Done = %q, want none", describe(before))
	}
	checkDone(t, d, 3, -1, "timed out after 200ms")
	// The step's time starts before the timer, which never fires early;
	// and a sleep that was not cut short would have taken its 10 s.
	if d.DurationNs < int64(200*time.Millisecond) || d.DurationNs >= int64(10*time.Second) {
		t.Errorf("DurationNs = %v, want from 200ms to less than the sleep's 10s", time.Duration(d.DurationNs))
	}
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	h := startAgent(t, &Agent{})
	// The grandchild would create marker after 1 s unless the whole
	// process group is killed at the deadline.
	h.step(proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"sh", "-c", "(sleep 1; touch " + marker + ") & wait"}, TimeoutMs: 200})
	_, d := h.until(1, 5*time.Second)
	checkDone(t, d, 1, -1, "timed out")
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Error("a process of the timed-out step's group survived the deadline")
	}
}

func TestExecSignaled(t *testing.T) {
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"sh", "-c", "kill -9 $$"}})
	_, d := h.until(1, 5*time.Second)
	checkDone(t, d, 1, -1, "killed by signal")
}

func TestExecEnvDirStdin(t *testing.T) {
	dir := t.TempDir()
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 4, Kind: proto.StepExec, Argv: []string{"sh", "-c", `echo "$FOO"; pwd; cat; echo "$PATH"`},
		Env: []string{"FOO=bar"}, Dir: dir})
	before, d := h.until(4, 10*time.Second)
	checkDone(t, d, 4, 0, "")
	var out bytes.Buffer
	for _, m := range before {
		if m.Kind != proto.KindOutput || m.Output.Stream != proto.Stdout {
			t.Fatalf("unexpected message %q", describe([]*proto.Message{m}))
		}
		out.Write(m.Output.Data)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if want := "bar\n" + real + "\n" + DefaultPath + "\n"; out.String() != want && out.String() != "bar\n"+dir+"\n"+DefaultPath+"\n" {
		t.Errorf("output = %q, want %q", out.String(), want)
	}
}

func TestExecPathFromStepEnv(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "klabtool"), []byte("#!/bin/sh\necho tool\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"klabtool"}})
	_, d := h.until(1, 5*time.Second)
	checkDone(t, d, 1, -1, `exec "klabtool": executable file not found`)
	h.step(proto.Step{ID: 2, Kind: proto.StepExec, Argv: []string{"klabtool"}, Env: []string{"PATH=" + dir + ":" + DefaultPath}})
	before, d := h.until(2, 5*time.Second)
	checkDone(t, d, 2, 0, "")
	if got := describe(before); got != "output stdout tool\n|" {
		t.Errorf("messages = %q", got)
	}
}

func TestExecStartFailures(t *testing.T) {
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 1, Kind: proto.StepExec})
	_, d := h.until(1, 5*time.Second)
	checkDone(t, d, 1, -1, "exec step without argv")
	h.step(proto.Step{ID: 2, Kind: proto.StepExec, Argv: []string{"/nonexistent/klab"}})
	_, d = h.until(2, 5*time.Second)
	checkDone(t, d, 2, -1, "fork/exec /nonexistent/klab")
	h.step(proto.Step{ID: 3, Kind: proto.StepExec, Argv: []string{"true"}, Dir: "/nonexistent/dir"})
	_, d = h.until(3, 5*time.Second)
	if d.ExitCode != -1 || !strings.Contains(d.Error, "/nonexistent/dir") {
		t.Errorf("Done = %+v, want a start failure naming the directory", *d)
	}
}

// waitFor is a shell loop that waits up to 120 s for the file $1 and then
// prints "released", or "gave up" when it never came. Tests release it once
// they have seen what must come first, so that what they check is the
// order of events, not how long each took.
const waitFor = `i=0; while [ ! -e "$1" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; if [ -e "$1" ]; then echo released; else echo gave up; fi`

// release creates the file a waitFor loop waits for.
func release(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestExecStreamsWhileRunning(t *testing.T) {
	// The command prints a, then cannot go on until the test has seen
	// a: output that was not streamed while the command ran would only
	// come after it gave up.
	rel := filepath.Join(t.TempDir(), "release")
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"sh", "-c", "echo a; " + waitFor, "sh", rel}})
	m := h.next(5 * time.Minute)
	if m.Kind != proto.KindOutput || string(m.Output.Data) != "a\n" {
		t.Fatalf("first message = %q, want output a while the command runs", describe([]*proto.Message{m}))
	}
	release(t, rel)
	before, d := h.until(1, 5*time.Minute)
	checkDone(t, d, 1, 0, "")
	if got := describe(before); got != "output stdout released\n|" {
		t.Errorf("rest = %q, want the command released after a was seen", got)
	}
}

func TestExecBackgroundChildDoesNotHang(t *testing.T) {
	// The background child keeps the output pipes open until the test
	// releases it, which it does only after step 1's Done: a Done that
	// waited for the child would come only after the child gave up.
	dir := t.TempDir()
	rel, ended := filepath.Join(dir, "release"), filepath.Join(dir, "ended")
	h := startAgent(t, &Agent{OutputGrace: 100 * time.Millisecond})
	h.step(proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"sh", "-c",
		`(trap '' PIPE; sh -c '` + waitFor + `' sh "$1"; echo late; touch "$2") & echo now`, "sh", rel, ended}})
	before, d := h.until(1, 5*time.Minute)
	checkDone(t, d, 1, 0, "")
	if _, err := os.Stat(ended); err == nil {
		t.Error("Done came after the background child ended: it waited for the child")
	}
	if got := describe(before); got != "output stdout now\n|" {
		t.Errorf("messages = %q", got)
	}
	// The late output of the background child must not show up later:
	// step 2 ends only after the child has written it.
	release(t, rel)
	h.step(proto.Step{ID: 2, Kind: proto.StepExec, Argv: []string{"sh", "-c", waitFor + " >/dev/null", "sh", ended}})
	before, d = h.until(2, 5*time.Minute)
	checkDone(t, d, 2, 0, "")
	if len(before) != 0 {
		t.Errorf("messages during step 2 = %q, want none", describe(before))
	}
}

func TestExecHugeOutput(t *testing.T) {
	const size = 5_000_000
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 9, Kind: proto.StepExec, Argv: []string{"sh", "-c", "yes abcdefg | head -c 5000000"}})
	before, d := h.until(9, 60*time.Second)
	checkDone(t, d, 9, 0, "")
	var out bytes.Buffer
	for _, m := range before {
		if m.Kind != proto.KindOutput || m.Output.Stream != proto.Stdout || m.Output.Step != 9 {
			t.Fatalf("unexpected message %q", describe([]*proto.Message{m}))
		}
		if n := len(m.Output.Data); n == 0 || n > proto.MaxChunk {
			t.Fatalf("chunk of %d bytes, want 1..%d", n, proto.MaxChunk)
		}
		out.Write(m.Output.Data)
	}
	if out.Len() != size {
		t.Fatalf("got %d bytes, want %d", out.Len(), size)
	}
	want := bytes.Repeat([]byte("abcdefg\n"), size/8)
	if !bytes.Equal(out.Bytes(), want) {
		t.Error("output content differs")
	}
	if len(before) < size/proto.MaxChunk {
		t.Errorf("%d chunks, want at least %d", len(before), size/proto.MaxChunk)
	}
}

func TestSysctlStep(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "fs", "fuse"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "fs", "fuse", "default_request_timeout")
	if err := os.WriteFile(file, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startAgent(t, &Agent{ProcSys: root})

	h.step(proto.Step{ID: 1, Kind: proto.StepSysctl, Key: "fs.fuse.default_request_timeout", Value: "30"})
	before, d := h.until(1, 5*time.Second)
	checkDone(t, d, 1, 0, "")
	if len(before) != 0 {
		t.Errorf("messages = %q, want none", describe(before))
	}
	// Written as sysctl -w writes it, with a newline.
	if b, _ := os.ReadFile(file); string(b) != "30\n" {
		t.Errorf("file = %q, want 30 and a newline", b)
	}

	h.step(proto.Step{ID: 2, Kind: proto.StepSysctl, Key: "fs/fuse/default_request_timeout", Value: "7"})
	_, d = h.until(2, 5*time.Second)
	checkDone(t, d, 2, 0, "")
	if b, _ := os.ReadFile(file); string(b) != "7\n" {
		t.Errorf("file = %q, want 7 and a newline", b)
	}

	h.step(proto.Step{ID: 3, Kind: proto.StepSysctl, Key: "fs.fuse.nope", Value: "1"})
	_, d = h.until(3, 5*time.Second)
	checkDone(t, d, 3, 1, `sysctl "fs.fuse.nope": no such key`)

	h.step(proto.Step{ID: 4, Kind: proto.StepSysctl, Key: "../../etc/passwd", Value: "x"})
	_, d = h.until(4, 5*time.Second)
	checkDone(t, d, 4, 1, `sysctl "../../etc/passwd": ".." segment`)
}

func TestUnknownStepKind(t *testing.T) {
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 5, Kind: "reboot-the-host"})
	before, d := h.until(5, 5*time.Second)
	if len(before) != 0 {
		t.Errorf("messages = %q, want none", describe(before))
	}
	checkDone(t, d, 5, -1, `unknown step kind "reboot-the-host"`)
}

func TestStepsRunInOrder(t *testing.T) {
	h := startAgent(t, &Agent{})
	// Send everything at once: the agent must run the steps one by one.
	h.step(proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"sh", "-c", "sleep 0.3; echo one"}})
	h.step(proto.Step{ID: 2, Kind: proto.StepExec, Argv: []string{"echo", "two"}})
	h.step(proto.Step{ID: 3, Kind: "bogus"})
	h.send(&proto.Message{Kind: proto.KindShutdown})
	var got []string
	for {
		m := h.next(10 * time.Second)
		switch m.Kind {
		case proto.KindOutput:
			got = append(got, "out:"+strings.TrimSpace(string(m.Output.Data)))
		case proto.KindDone:
			got = append(got, "done:"+string(rune('0'+m.Done.Step)))
		default:
			got = append(got, string(m.Kind))
		}
		if m.Kind == proto.KindBye {
			break
		}
	}
	if s, want := strings.Join(got, " "), "out:one done:1 out:two done:2 done:3 bye"; s != want {
		t.Errorf("sequence = %q, want %q", s, want)
	}
	if err := <-h.served; err != nil {
		t.Errorf("Serve after shutdown = %v, want nil", err)
	}
}

func TestShutdown(t *testing.T) {
	h := startAgent(t, &Agent{})
	h.send(&proto.Message{Kind: proto.KindShutdown})
	if m := h.next(5 * time.Second); m.Kind != proto.KindBye {
		t.Fatalf("got %s, want bye", m.Kind)
	}
	select {
	case err := <-h.served:
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after shutdown")
	}
}

func TestHostEOF(t *testing.T) {
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"true"}})
	h.until(1, 5*time.Second)
	h.toA.Close()
	select {
	case err := <-h.served:
		if !errors.Is(err, io.EOF) {
			t.Errorf("Serve = %v, want io.EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return at EOF")
	}
}

func TestReadError(t *testing.T) {
	h := startAgent(t, &Agent{})
	boom := errors.New("boom")
	h.toA.CloseWithError(boom)
	select {
	case err := <-h.served:
		if !errors.Is(err, boom) || errors.Is(err, io.EOF) {
			t.Errorf("Serve = %v, want the read error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
}

func TestBadInputIsLoggedAndSkipped(t *testing.T) {
	h := startAgent(t, &Agent{})
	write := func(s string) {
		if _, err := io.WriteString(h.toA, s); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		write("login: noise on the line\n\n")
		write("{" + strings.Repeat("x", proto.MaxLine+10) + "}\n") // too long
		write("{not json}\n")
		write(`{"v":99,"kind":"step","step":{"id":7,"kind":"exec"}}` + "\n")
		write(`{"v":1,"kind":"step"}` + "\n")
		write(`{"v":1,"kind":"hello","hello":{}}` + "\n")
		_ = h.enc.Encode(&proto.Message{Kind: proto.KindStep, Step: &proto.Step{ID: 8, Kind: proto.StepExec, Argv: []string{"echo", "ok"}}})
	}()
	before, d := h.until(8, 10*time.Second)
	checkDone(t, d, 8, 0, "")
	var logs []string
	for _, m := range before {
		if m.Kind == proto.KindLog {
			logs = append(logs, m.Log.Msg)
		}
	}
	if len(logs) != 5 {
		t.Errorf("logs = %q, want 5", logs)
	}
	if len(logs) > 0 && !strings.Contains(logs[0], proto.ErrLineTooLong.Error()) {
		t.Errorf("first log = %q, want line too long", logs[0])
	}
	if got := describe(before[len(before)-1:]); got != "output stdout ok\n|" {
		t.Errorf("last message = %q", got)
	}
}

func TestCancelKillsRunningStep(t *testing.T) {
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"sh", "-c", "echo started; exec sleep 600"}})
	// Cancel once the step runs, however long it took to start.
	if m := h.next(5 * time.Minute); m.Kind != proto.KindOutput || string(m.Output.Data) != "started\n" {
		t.Fatalf("first message = %q, want output started", describe([]*proto.Message{m}))
	}
	h.cancel()
	_, d := h.until(1, 5*time.Second)
	checkDone(t, d, 1, -1, "canceled")
	if err := <-h.served; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve = %v, want context.Canceled", err)
	}
}

func TestSendHelloDropsHugeConfig(t *testing.T) {
	var out bytes.Buffer
	a := &Agent{Out: &out}
	cfg := bytes.Repeat([]byte{0xff}, MaxConfigGz) // base64 makes it > MaxLine
	if err := a.SendHello(&proto.Hello{AgentVersion: "x", ConfigGz: cfg}); err != nil {
		t.Fatal(err)
	}
	dec := proto.NewDecoder(&out)
	m, err := dec.Decode()
	if err != nil || m.Kind != proto.KindHello || m.Hello.ConfigGz != nil || m.Hello.AgentVersion != "x" {
		t.Fatalf("first = %+v, %v; want hello without config", m, err)
	}
	m, err = dec.Decode()
	if err != nil || m.Kind != proto.KindLog || !strings.Contains(m.Log.Msg, "config.gz") {
		t.Fatalf("second = %+v, %v; want a log about config.gz", m, err)
	}
}

func TestNewHello(t *testing.T) {
	mods := []proto.ModuleLoad{{Name: "fuse"}}
	h := NewHello("/dev/vport1p1", mods)
	if h.AgentVersion != Version || h.Channel != "/dev/vport1p1" || len(h.Modules) != 1 {
		t.Errorf("hello = %+v", h)
	}
	if h.CPUs <= 0 || h.BootNanos <= 0 || h.Uname.Sysname != "Linux" || h.Uname.Release == "" {
		t.Errorf("hello facts = cpus %d boot %d uname %+v", h.CPUs, h.BootNanos, h.Uname)
	}
	m := &proto.Message{Kind: proto.KindHello, Hello: h}
	var buf bytes.Buffer
	if err := proto.NewEncoder(&buf).Encode(m); err != nil {
		t.Fatalf("encode hello: %v", err)
	}
}

// A sysrq message is served at once, even while a step runs: the step
// cannot end before the test has seen the sysrq served.
func TestSysrqOutOfBand(t *testing.T) {
	rel := filepath.Join(t.TempDir(), "release")
	trigger := filepath.Join(t.TempDir(), "sysrq-trigger")
	if err := os.WriteFile(trigger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	hostR, agentW := io.Pipe()
	agentR, hostW := io.Pipe()
	a := &Agent{In: agentR, Out: agentW, SysrqTrigger: trigger}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Serve(ctx)
	enc := proto.NewEncoder(hostW)
	dec := proto.NewDecoder(hostR)
	// A step that waits for the test first, then the sysrq.
	if err := enc.Encode(&proto.Message{Kind: proto.KindStep, Step: &proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"sh", "-c", waitFor, "sh", rel}}}); err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(&proto.Message{Kind: proto.KindSysrq, Sysrq: "w"}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := dec.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind == proto.KindDone {
			t.Fatal("the step finished before the sysrq was served")
		}
		if m.Kind == proto.KindLog && strings.Contains(m.Log.Msg, "sysrq w triggered") {
			break
		}
	}
	release(t, rel)
	b, _ := os.ReadFile(trigger)
	if string(b) != "w" {
		t.Errorf("trigger got %q", b)
	}
}

func TestCheckShareTarget(t *testing.T) {
	for target, ok := range map[string]bool{
		"/src": true, "/mnt/a/b": true, "/": false, "src": false, "/src/": false, "/a/../b": false,
		"/proc": false, "/sys/x": false, "/dev/shm": false, "/devices": true,
	} {
		if err := checkShareTarget(target); (err == nil) != ok {
			t.Errorf("checkShareTarget(%q) = %v, want ok=%v", target, err, ok)
		}
	}
}
