package vm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/digitalocean/go-qemu/qmp"

	"klab/internal/proc"
)

// Machine is one running QEMU guest.
type Machine struct {
	cfg     Config
	argv    []string
	sockets Sockets
	cmd     *exec.Cmd
	started time.Time

	exited  chan struct{} // closed when QEMU has exited
	exitErr error         // set before exited is closed
	// stopping is set once klab itself kills or quits QEMU: a signal
	// death after it is klab's doing, before it someone else's.
	stopping atomic.Bool

	qemuOut tail // QEMU's own stdout and stderr (batch mode)

	mu       sync.Mutex // guards lines, mon and shutdown
	lines    []string   // the last console lines, for error reports
	mon      *qmp.SocketMonitor
	shutdown *Shutdown // QEMU's first SHUTDOWN event, nil before one
	consoleW io.Writer
	qmpDone  chan struct{} // closed when QMP's event stream has ended

	agentReady chan *Agent // receives the first agent that says Hello
	agentBad   chan error  // receives a channel's protocol error before Hello
	panicked   chan string // receives QMP GUEST_PANICKED
	consoleEOF chan struct{}
}

// StartOptions are the host-side hooks of a machine.
type StartOptions struct {
	// Console receives the raw console bytes (batch mode), e.g. console.log.
	Console io.Writer
	// OnConsoleLine is called for each console line as it arrives (batch
	// mode), e.g. the splat scanner. It must not block.
	OnConsoleLine func(line string)
	// Stdin, Stdout and Stderr are QEMU's own stdio in Interactive mode.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// keepLines is how many console lines a Machine remembers for reports.
const keepLines = 40

// Start launches QEMU for c. The returned Machine outlives ctx, which only
// bounds the start-up; end it with Kill or Quit, then Wait. QEMU dies with
// klab: it gets SIGKILL when klab dies, even by kill -9.
func Start(ctx context.Context, c Config, o StartOptions) (*Machine, error) {
	removeStaleDirs.Do(func() { RemoveStaleTempDirs(os.TempDir(), TempDirPrefix) })
	dir, err := MkdirTemp(TempDirPrefix)
	if err != nil {
		return nil, err
	}
	s := NewSockets(dir)
	argv, err := Argv(c, s)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		os.RemoveAll(dir)
		return nil, &QEMUMissingError{Binary: argv[0]}
	}
	m := &Machine{
		cfg: c, argv: argv, sockets: s,
		exited:     make(chan struct{}),
		agentReady: make(chan *Agent, 1),
		agentBad:   make(chan error, 2),
		panicked:   make(chan string, 1),
		consoleEOF: make(chan struct{}),
		qmpDone:    make(chan struct{}),
		consoleW:   o.Console,
	}
	// klab listens; QEMU connects to the console and agent sockets as a
	// client at start-up, so nothing the guest says is lost.
	var lns []*net.UnixListener
	listen := func(path string) *net.UnixListener {
		if err != nil {
			return nil
		}
		var l *net.UnixListener
		l, err = net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		lns = append(lns, l)
		return l
	}
	var conL *net.UnixListener
	if c.Mode == Batch {
		conL = listen(s.Console)
	}
	agentL := listen(s.Agent)
	serialL := listen(s.Serial)
	closeAll := func() {
		for _, l := range lns {
			if l != nil {
				l.Close()
			}
		}
	}
	if err != nil {
		closeAll()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("vm: listen: %w", err)
	}

	// QEMU's lifetime is not ctx's: it ends with Kill, Quit or klab's death.
	m.cmd = proc.Command(context.Background(), argv...)
	if c.Mode == Interactive {
		m.cmd.Stdin, m.cmd.Stdout, m.cmd.Stderr = o.Stdin, o.Stdout, o.Stderr
		// The shell needs the terminal's foreground process group.
		m.cmd.SysProcAttr.Setpgid = false
	} else {
		m.cmd.Stdout, m.cmd.Stderr = &m.qemuOut, &m.qemuOut
	}
	m.started = time.Now()
	if err := m.cmd.Start(); err != nil {
		closeAll()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("vm: start %s: %w", argv[0], err)
	}
	go func() {
		err := m.cmd.Wait()
		m.exitErr = err
		close(m.exited)
		closeAll()
		os.RemoveAll(dir)
	}()

	accept := func(l *net.UnixListener) (net.Conn, error) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			_ = l.SetDeadline(time.Now().Add(100 * time.Millisecond))
			conn, err := l.Accept()
			if err == nil {
				return conn, nil
			}
			select {
			case <-m.exited:
				return nil, m.startFailure()
			case <-ctx.Done():
				return nil, ctx.Err()
			default:
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("vm: qemu did not connect to %s", l.Addr())
			}
		}
	}
	fail := func(err error) (*Machine, error) {
		m.Kill()
		_ = m.Wait()
		return nil, err
	}
	if conL != nil {
		conn, err := accept(conL)
		if err != nil {
			return fail(err)
		}
		go m.readConsole(conn, o.OnConsoleLine)
	} else {
		close(m.consoleEOF)
	}
	for _, l := range []*net.UnixListener{agentL, serialL} {
		conn, err := accept(l)
		if err != nil {
			return fail(err)
		}
		go m.readAgent(conn, l == agentL)
	}
	if err := m.connectQMP(ctx); err != nil {
		return fail(err)
	}
	return m, nil
}

// QEMUMissingError says that QEMU is not installed.
type QEMUMissingError struct{ Binary string }

func (e *QEMUMissingError) Error() string {
	return fmt.Sprintf("%s not found in PATH: install QEMU (Debian/Ubuntu: apt-get install qemu-system-x86), or run `make deps`", e.Binary)
}

// startFailure describes a QEMU that exited during start-up.
func (m *Machine) startFailure() error {
	return fmt.Errorf("vm: qemu exited during start-up (%v): %s", m.exitErr, strings.TrimSpace(m.qemuOut.String()))
}

func (m *Machine) connectQMP(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		mon, err := qmp.NewSocketMonitor("unix", m.sockets.QMP, time.Second)
		if err == nil {
			if err = mon.Connect(); err == nil {
				events, err := mon.Events(context.Background())
				if err != nil {
					return fmt.Errorf("vm: qmp events: %w", err)
				}
				m.mu.Lock()
				m.mon = mon
				m.mu.Unlock()
				go m.watchQMP(events)
				return nil
			}
		}
		select {
		case <-m.exited:
			return m.startFailure()
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("vm: qmp: %w", err)
		}
	}
}

func (m *Machine) watchQMP(events <-chan qmp.Event) {
	defer close(m.qmpDone)
	for ev := range events {
		switch ev.Event {
		case "GUEST_PANICKED":
			b, _ := json.Marshal(ev.Data)
			select {
			case m.panicked <- string(b):
			default:
			}
		case "SHUTDOWN":
			guest, _ := ev.Data["guest"].(bool)
			reason, _ := ev.Data["reason"].(string)
			m.mu.Lock()
			if m.shutdown == nil {
				m.shutdown = &Shutdown{Guest: guest, Reason: reason}
			}
			m.mu.Unlock()
		}
	}
}

// Shutdown is QEMU's SHUTDOWN event: who ended the machine, and why.
type Shutdown struct {
	// Guest is set when the guest asked for it: a power-off, or a reset
	// (klab runs QEMU with -no-reboot, so a reset ends it too).
	Guest bool
	// Reason is QEMU's: guest-shutdown, guest-reset, guest-panic,
	// host-qmp-quit (the monitor's quit, or Ctrl-A x on the console),
	// host-signal (QEMU was sent SIGTERM, SIGINT or SIGHUP), ...
	Reason string
}

// ShutdownEvent returns the SHUTDOWN event QEMU sent, and false when it
// sent none (it was killed, or crashed). Once QEMU has exited it waits up
// to wait for the rest of QMP's events to be read, which QEMU sent before
// it exited.
func (m *Machine) ShutdownEvent(wait time.Duration) (Shutdown, bool) {
	select {
	case <-m.exited:
		select {
		case <-m.qmpDone:
		case <-time.After(wait):
		}
	default:
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shutdown == nil {
		return Shutdown{}, false
	}
	return *m.shutdown, true
}

// maxConsoleLine bounds one console line kept in memory.
const maxConsoleLine = 4 << 10

func (m *Machine) readConsole(conn net.Conn, onLine func(string)) {
	defer close(m.consoleEOF)
	defer conn.Close()
	buf := make([]byte, 32<<10)
	var line []byte
	for {
		n, err := conn.Read(buf)
		chunk := buf[:n]
		if n > 0 && m.consoleW != nil {
			_, _ = m.consoleW.Write(chunk)
		}
		for len(chunk) > 0 {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				line = appendBounded(line, chunk)
				break
			}
			line = appendBounded(line, chunk[:i])
			m.addLine(strings.TrimRight(string(line), "\r"), onLine)
			line = line[:0]
			chunk = chunk[i+1:]
		}
		if err != nil {
			if len(line) > 0 {
				m.addLine(string(line), onLine)
			}
			return
		}
	}
}

// appendBounded appends p to line, keeping at most maxConsoleLine bytes.
func appendBounded(line, p []byte) []byte {
	if room := maxConsoleLine - len(line); len(p) > room {
		p = p[:max(room, 0)]
	}
	return append(line, p...)
}

func (m *Machine) addLine(l string, onLine func(string)) {
	m.mu.Lock()
	m.lines = append(m.lines, l)
	if len(m.lines) > 2*keepLines {
		m.lines = append(m.lines[:0], m.lines[len(m.lines)-keepLines:]...)
	}
	m.mu.Unlock()
	if onLine != nil {
		onLine(l)
	}
}

// LastConsoleLines returns up to n of the last console lines.
func (m *Machine) LastConsoleLines(n int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.lines
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return append([]string(nil), l...)
}

// AgentReady returns a channel that yields the agent once it says Hello.
func (m *Machine) AgentReady() <-chan *Agent { return m.agentReady }

// Panicked yields the QMP GUEST_PANICKED event data.
func (m *Machine) Panicked() <-chan string { return m.panicked }

// Exited is closed when QEMU has exited.
func (m *Machine) Exited() <-chan struct{} { return m.exited }

// ConsoleDone is closed when the console stream has ended (QEMU exited and
// all its console output was read).
func (m *Machine) ConsoleDone() <-chan struct{} { return m.consoleEOF }

// Argv is QEMU's command line, for the manifest and for reproducing a run.
func (m *Machine) Argv() []string { return m.argv }

// Started is when QEMU was started.
func (m *Machine) Started() time.Time { return m.started }

// Pid is QEMU's process id.
func (m *Machine) Pid() int { return m.cmd.Process.Pid }

// QEMUOutput is what QEMU itself printed (batch mode).
func (m *Machine) QEMUOutput() string { return m.qemuOut.String() }

// SendKeys sends key presses through QMP, e.g. "alt-sysrq-t" for a sysrq.
func (m *Machine) SendKeys(keys ...string) error {
	m.mu.Lock()
	mon := m.mon
	m.mu.Unlock()
	if mon == nil {
		return errors.New("vm: no qmp connection")
	}
	type keyValue struct {
		Type string `json:"type"`
		Data string `json:"data"`
	}
	var kv []keyValue
	for _, k := range keys {
		kv = append(kv, keyValue{"qcode", k})
	}
	b, _ := json.Marshal(map[string]any{"execute": "send-key", "arguments": map[string]any{"keys": kv}})
	_, err := mon.Run(b)
	return err
}

// Status returns QMP query-status's "status" field.
func (m *Machine) Status() (string, error) {
	m.mu.Lock()
	mon := m.mon
	m.mu.Unlock()
	if mon == nil {
		return "", errors.New("vm: no qmp connection")
	}
	out, err := mon.Run([]byte(`{"execute":"query-status"}`))
	if err != nil {
		return "", err
	}
	var r struct {
		Return struct {
			Status string `json:"status"`
		} `json:"return"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return "", err
	}
	return r.Return.Status, nil
}

// Quit asks QEMU to quit through QMP and kills it if that fails.
func (m *Machine) Quit() {
	m.stopping.Store(true)
	m.mu.Lock()
	mon := m.mon
	m.mu.Unlock()
	if mon != nil {
		if _, err := mon.Run([]byte(`{"execute":"quit"}`)); err == nil {
			select {
			case <-m.exited:
				return
			case <-time.After(3 * time.Second):
			}
		}
	}
	m.Kill()
}

// Kill kills QEMU at once.
func (m *Machine) Kill() {
	m.stopping.Store(true)
	if m.cmd.Process != nil {
		_ = m.cmd.Process.Signal(syscall.SIGKILL)
	}
}

// KilledFromOutside says, once QEMU has exited, whether a signal that
// klab did not send ended it (kill -9 by a user, the OOM killer), and
// describes it: "qemu (pid N) was killed by signal SIGKILL, not by klab".
// It is "" while QEMU runs, after a normal exit, and after klab's own
// Kill or Quit.
func (m *Machine) KilledFromOutside() string {
	select {
	case <-m.exited:
	default:
		return ""
	}
	if m.stopping.Load() {
		return ""
	}
	var ee *exec.ExitError
	if !errors.As(m.exitErr, &ee) {
		return ""
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return ""
	}
	return fmt.Sprintf("qemu (pid %d) was killed by signal %s, not by klab", m.cmd.Process.Pid, signalName(ws.Signal()))
}

// signalName is a signal's SIG name, or its number.
func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT",
		syscall.SIGHUP: "SIGHUP", syscall.SIGSEGV: "SIGSEGV", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS"}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

// Wait waits for QEMU to exit and returns its exit error, if any.
func (m *Machine) Wait() error {
	<-m.exited
	m.mu.Lock()
	if m.mon != nil {
		_ = m.mon.Disconnect()
		m.mon = nil
	}
	m.mu.Unlock()
	return m.exitErr
}

// tail keeps the last 64 KiB written to it; it is safe for concurrent use.
type tail struct {
	mu sync.Mutex // guards b
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 128<<10 {
		t.b = append(t.b[:0], t.b[len(t.b)-(64<<10):]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
