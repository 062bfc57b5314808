// Command hostile is a guest init that abuses klab's agent channel, for
// e2e/hostile_test.go. The kernel runs it as init (rdinit=/hostile)
// instead of klab's agent; it mounts what it needs, finds the agent's
// virtio port as the agent does, and then, by hostile.mode= on the kernel
// command line:
//
//   - prehello: noise, then a line over proto.MaxLine, before any Hello;
//   - names:    a Hello and messages with path-like names
//     (../../TAG, /TAG) in every string, invalid UTF-8 inside strings, a
//     Done for a step ID near 2^63, then a message of kind "../../TAG";
//   - hugeid:   a Done whose step ID has 400 digits;
//   - flood:    hostile.mb= MiB of output, stdout and stderr in turn, as
//     fast as it can, then a line of invalid UTF-8 outside any string;
//   - afterlast: a proper Done for the host's step, then an over-long line
//     before the host's shutdown.
//
// TAG is hostile.tag=: the test looks for it on the host's file system.
// Init must never exit (the kernel would panic), so it sleeps at the end.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/proto"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "hostile: %v\n", err)
	}
	for {
		time.Sleep(time.Hour)
	}
}

func run() error {
	for _, m := range []struct{ src, dir, fs string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
	} {
		_ = os.MkdirAll(m.dir, 0o755)
		if err := unix.Mount(m.src, m.dir, m.fs, 0, ""); err != nil && err != unix.EBUSY {
			return fmt.Errorf("mount %s: %w", m.dir, err)
		}
	}
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return err
	}
	params := map[string]string{}
	for _, f := range strings.Fields(string(cmdline)) {
		if k, v, ok := strings.Cut(f, "="); ok && strings.HasPrefix(k, "hostile.") {
			params[strings.TrimPrefix(k, "hostile.")] = v
		}
	}
	port, err := findPort(10 * time.Second)
	if err != nil {
		return err
	}
	ch, err := os.OpenFile(port, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "hostile: mode %s on %s\n", params["mode"], port)
	// The host checks the agent's version: the real agent, /init, says it.
	out, err := exec.Command("/init", "--version").Output()
	if err != nil {
		return fmt.Errorf("/init --version: %w", err)
	}
	h := &hostile{ch: ch, rd: bufio.NewReader(ch), version: strings.TrimSpace(string(out)), tag: params["tag"]}
	switch params["mode"] {
	case "prehello":
		h.raw("not json at all\n\x00\x01\x02\n")
		h.raw("{" + strings.Repeat("A", proto.MaxLine+1) + "}\n")
	case "names":
		h.hello(true)
		id := h.step()
		bad := "\xff\xfe../../" + h.tag
		h.send(proto.Message{Kind: proto.KindLog, Log: &proto.Log{Msg: bad}})
		// json.Marshal would replace the invalid bytes: send them raw.
		h.raw(`{"v":1,"kind":"log","log":{"msg":"` + bad + `"}}` + "\n")
		h.send(proto.Message{Kind: proto.KindOutput, Output: &proto.Output{Step: id, Stream: proto.Stdout, Data: []byte("../../" + h.tag + "\n")}})
		h.send(proto.Message{Kind: proto.KindSample, Sample: &proto.Sample{Step: id, Engine: proto.Engine("../../" + h.tag), Name: "/" + h.tag}})
		h.send(proto.Message{Kind: proto.KindDone, Done: &proto.Done{Step: 1<<63 - 1, Error: bad}})
		h.raw(`{"v":1,"kind":"../../` + h.tag + `"}` + "\n")
	case "hugeid":
		h.hello(false)
		h.step()
		h.raw(`{"v":1,"kind":"done","done":{"step":` + strings.Repeat("9", 400) + `}}` + "\n")
	case "flood":
		h.hello(false)
		id := h.step()
		mb, _ := strconv.Atoi(params["mb"])
		chunk := bytes.Repeat([]byte("flood "), proto.MaxChunk/6)
		var lines [2][]byte
		for i, s := range []proto.Stream{proto.Stdout, proto.Stderr} {
			lines[i] = h.line(proto.Message{Kind: proto.KindOutput, Output: &proto.Output{Step: id, Stream: s, Data: chunk}})
		}
		start := time.Now()
		sent := 0
		for i := 0; sent < mb<<20; i++ {
			h.raw(string(lines[i%2]))
			sent += len(chunk)
		}
		fmt.Fprintf(os.Stderr, "hostile: %d bytes of output in %v\n", sent, time.Since(start))
		h.raw("{\"v\":1,\xff\xfe\xfd}\n")
	case "afterlast":
		h.hello(false)
		id := h.step()
		h.send(proto.Message{Kind: proto.KindDone, Done: &proto.Done{Step: id, ExitCode: 0}})
		h.raw("{" + strings.Repeat("B", proto.MaxLine+1) + "\n")
	default:
		return fmt.Errorf("unknown hostile.mode=%q", params["mode"])
	}
	fmt.Fprintf(os.Stderr, "hostile: mode %s done\n", params["mode"])
	// Keep reading what the host says, so that nothing blocks on us.
	for {
		if _, err := h.rd.ReadBytes('\n'); err != nil {
			return nil
		}
	}
}

// findPort waits for the virtio port named klab.agent, as the agent's
// FindChannel does, and returns its device node.
func findPort(wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		names, _ := filepath.Glob("/sys/class/virtio-ports/vport*p*/name")
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err == nil && strings.TrimSpace(string(b)) == "klab.agent" {
				dev := filepath.Join("/dev", filepath.Base(filepath.Dir(n)))
				if _, err := os.Stat(dev); err == nil {
					return dev, nil
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("no virtio port named klab.agent after %v", wait)
}

type hostile struct {
	ch      *os.File
	rd      *bufio.Reader
	version string
	tag     string
}

func (h *hostile) raw(s string) {
	if _, err := h.ch.WriteString(s); err != nil {
		fmt.Fprintf(os.Stderr, "hostile: write: %v\n", err)
	}
}

func (h *hostile) line(m proto.Message) []byte {
	m.V = proto.Version
	b, err := json.Marshal(&m)
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

func (h *hostile) send(m proto.Message) { h.raw(string(h.line(m))) }

// hello says Hello with the real agent's version; with names, every other
// string in it is a path.
func (h *hostile) hello(names bool) {
	hl := &proto.Hello{AgentVersion: h.version, Uname: proto.Uname{Release: "hostile"}, CPUs: 1, Channel: "hostile"}
	if names {
		p := "../../" + h.tag
		hl.Uname = proto.Uname{Sysname: p, Release: p, Version: "/" + h.tag, Machine: "\xff" + p}
		hl.Channel, hl.FUSEUring = p, p
		hl.Modules = []proto.ModuleLoad{{Name: p, Error: p}}
	}
	h.send(proto.Message{Kind: proto.KindHello, Hello: hl})
}

// step waits for the host's step and returns its ID.
func (h *hostile) step() int {
	for {
		line, err := h.rd.ReadBytes('\n')
		if err != nil {
			fmt.Fprintf(os.Stderr, "hostile: read: %v\n", err)
			return 0
		}
		var m proto.Message
		if json.Unmarshal(line, &m) == nil && m.Kind == proto.KindStep {
			return m.Step.ID
		}
	}
}
