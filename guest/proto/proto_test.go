package proto

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func sampleMessages() []*Message {
	return []*Message{
		{Kind: KindHello, Hello: &Hello{
			AgentVersion: "v1.2.3",
			Uname:        Uname{Sysname: "Linux", Release: "6.12.0", Version: "#1 SMP", Machine: "x86_64"},
			CPUs:         4, MemKiB: 2030412, ConfigGz: []byte{0x1f, 0x8b, 0, 1, 2},
			FUSE: true, IOUring: true, FUSEUring: "Y",
			Modules:   []ModuleLoad{{Name: "fuse"}, {Name: "brd", Error: "exists"}},
			Channel:   "/dev/vport1p1",
			BootNanos: 123456789,
		}},
		{Kind: KindStep, Step: &Step{ID: 7, Kind: StepExec, Argv: []string{"fio", "--name=x"}, Env: []string{"A=b"}, Dir: "/tmp", TimeoutMs: 5000}},
		{Kind: KindStep, Step: &Step{ID: 8, Kind: StepSysctl, Key: "fs.fuse.default_request_timeout", Value: "30"}},
		{Kind: KindOutput, Output: &Output{Step: 7, Stream: Stderr, Data: []byte("line\n\x00\xff binary")}},
		{Kind: KindDone, Done: &Done{Step: 7, ExitCode: -1, Error: "timed out", DurationNs: 42}},
		{Kind: KindLog, Log: &Log{Msg: "hello \"world\"\n"}},
		{Kind: KindBye},
		{Kind: KindShutdown},
	}
}

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	msgs := sampleMessages()
	for _, m := range msgs {
		if err := enc.Encode(m); err != nil {
			t.Fatalf("Encode(%s): %v", m.Kind, err)
		}
		if m.V != Version {
			t.Errorf("Encode did not stamp the version: %d", m.V)
		}
	}
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != len(msgs) {
		t.Errorf("%d lines for %d messages", n, len(msgs))
	}
	dec := NewDecoder(&buf)
	for _, want := range msgs {
		got, err := dec.Decode()
		if err != nil {
			t.Fatalf("Decode(%s): %v", want.Kind, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip of %s:\n got %+v\nwant %+v", want.Kind, got, want)
		}
	}
	if _, err := dec.Decode(); err != io.EOF {
		t.Errorf("Decode at end = %v, want io.EOF", err)
	}
}

func TestDecodeSkipsNoise(t *testing.T) {
	in := "\n" +
		"   \r\n" +
		"[    1.234] random kernel noise\n" +
		"login: \n" +
		"\x00\x00 \t" + `{"v":1,"kind":"bye"}` + "\r\n" +
		"garbage\n" +
		`{"v":1,"kind":"log","log":{"msg":"last"}}` // no final newline
	dec := NewDecoder(strings.NewReader(in))
	m, err := dec.Decode()
	if err != nil || m.Kind != KindBye {
		t.Fatalf("first = %+v, %v; want bye", m, err)
	}
	m, err = dec.Decode()
	if err != nil || m.Kind != KindLog || m.Log.Msg != "last" {
		t.Fatalf("second = %+v, %v; want log", m, err)
	}
	if _, err := dec.Decode(); err != io.EOF {
		t.Errorf("third = %v, want io.EOF", err)
	}
}

func TestDecodeLineTooLong(t *testing.T) {
	for _, n := range []int{MaxLine + 1, MaxLine + 100, 3 * MaxLine} {
		long := `{"v":1,"kind":"log","log":{"msg":"` + strings.Repeat("x", n) + `"}}`
		in := long + "\n" + `{"v":1,"kind":"bye"}` + "\n" + long // the last one without newline
		dec := NewDecoder(strings.NewReader(in))
		if _, err := dec.Decode(); !errors.Is(err, ErrLineTooLong) {
			t.Fatalf("n=%d: first = %v, want ErrLineTooLong", n, err)
		}
		m, err := dec.Decode()
		if err != nil || m.Kind != KindBye {
			t.Fatalf("n=%d: after the long line = %+v, %v; want bye", n, m, err)
		}
		if _, err := dec.Decode(); !errors.Is(err, ErrLineTooLong) {
			t.Errorf("n=%d: unterminated long line = %v, want ErrLineTooLong", n, err)
		}
		if _, err := dec.Decode(); err != io.EOF {
			t.Errorf("n=%d: at end = %v, want io.EOF", n, err)
		}
	}
}

func TestDecodeLineAtLimit(t *testing.T) {
	prefix, suffix := `{"v":1,"kind":"log","log":{"msg":"`, `"}}`
	line := prefix + strings.Repeat("y", MaxLine-len(prefix)-len(suffix)) + suffix
	if len(line) != MaxLine {
		t.Fatal("bad test line")
	}
	m, err := NewDecoder(strings.NewReader(line + "\n")).Decode()
	if err != nil || m.Kind != KindLog || len(m.Log.Msg) != MaxLine-len(prefix)-len(suffix) {
		t.Errorf("line of exactly MaxLine: %v", err)
	}
}

func TestEncodeTooLong(t *testing.T) {
	var buf bytes.Buffer
	err := NewEncoder(&buf).Encode(&Message{Kind: KindLog, Log: &Log{Msg: strings.Repeat("z", MaxLine)}})
	if !errors.Is(err, ErrLineTooLong) {
		t.Errorf("Encode of an over-long message = %v, want ErrLineTooLong", err)
	}
	if buf.Len() != 0 {
		t.Errorf("Encode wrote %d bytes of an over-long message", buf.Len())
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range []struct{ name, line, want string }{
		{"version mismatch", `{"v":2,"kind":"bye"}`, "version 2"},
		{"version missing", `{"kind":"bye"}`, "version 0"},
		{"unknown kind", `{"v":1,"kind":"reboot"}`, "unknown kind"},
		{"hello without payload", `{"v":1,"kind":"hello"}`, "without its payload"},
		{"step without payload", `{"v":1,"kind":"step"}`, "without its payload"},
		{"step with null payload", `{"v":1,"kind":"step","step":null}`, "without its payload"},
		{"output without payload", `{"v":1,"kind":"output","log":{"msg":"x"}}`, "without its payload"},
		{"done without payload", `{"v":1,"kind":"done"}`, "without its payload"},
		{"log without payload", `{"v":1,"kind":"log"}`, "without its payload"},
		{"bad json", `{"v":1,"kind":`, "decode"},
		{"wrong type", `{"v":"1","kind":"bye"}`, "decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec := NewDecoder(strings.NewReader(tc.line + "\n" + `{"v":1,"kind":"bye"}` + "\n"))
			m, err := dec.Decode()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode = %+v, %v; want error %q", m, err, tc.want)
			}
			// The decoder goes on with the next line.
			if m, err := dec.Decode(); err != nil || m.Kind != KindBye {
				t.Errorf("after the bad line: %+v, %v; want bye", m, err)
			}
		})
	}
}

func TestEncoderConcurrent(t *testing.T) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 100; i++ {
				if err := enc.Encode(&Message{Kind: KindOutput, Output: &Output{Step: g, Stream: Stdout, Data: bytes.Repeat([]byte{'a'}, 1000)}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for g := 0; g < 8; g++ {
		<-done
	}
	dec := NewDecoder(&buf)
	n := 0
	for {
		_, err := dec.Decode()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("message %d: %v", n, err)
		}
		n++
	}
	if n != 800 {
		t.Errorf("decoded %d messages, want 800", n)
	}
}

func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	for _, m := range sampleMessages() {
		buf.Reset()
		if err := enc.Encode(m); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add([]byte("noise\n{\"v\":1,\"kind\":\"bye\"}\n{\"v\":1}\n\n{"))
	f.Add([]byte(`{"v":1,"kind":"step","step":null}`))
	f.Add([]byte("\x00\r\t {\"v\":1,\"kind\":\"shutdown\",\"hello\":{}}\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := NewDecoder(bytes.NewReader(data))
		// Every Decode consumes at least one line, so this ends.
		for i := 0; i <= bytes.Count(data, []byte("\n"))+1; i++ {
			m, err := dec.Decode()
			if err == io.EOF {
				return
			}
			if err != nil {
				if m != nil {
					t.Fatalf("Decode returned a message with error %v", err)
				}
				continue
			}
			if verr := m.Validate(); verr != nil {
				t.Fatalf("Decode returned an invalid message: %v", verr)
			}
			// What decodes must encode again, and encoding must be stable.
			var b1, b2 bytes.Buffer
			if err := NewEncoder(&b1).Encode(m); err != nil {
				if errors.Is(err, ErrLineTooLong) {
					continue
				}
				t.Fatalf("re-encode: %v", err)
			}
			m2, err := NewDecoder(bytes.NewReader(b1.Bytes())).Decode()
			if err != nil {
				t.Fatalf("decode of re-encoded message: %v", err)
			}
			if err := NewEncoder(&b2).Encode(m2); err != nil {
				t.Fatalf("re-encode again: %v", err)
			}
			if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
				t.Fatalf("encoding not stable:\n%s%s", b1.Bytes(), b2.Bytes())
			}
		}
		t.Fatal("Decode did not reach EOF")
	})
}
