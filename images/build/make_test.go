package build

import (
	"bytes"
	"strings"
	"testing"
)

const failedLog = `  CC      fs/fuse/dir.o
  CC      fs/fuse/inode.o
/cache/work/s1/src/fs/fuse/inode.c: In function 'fuse_init':
/cache/work/s1/src/fs/fuse/inode.c:2146:9: error: 'hello' undeclared (first use in this function)
 2146 |         hello = 1;
      |         ^~~~~
/cache/work/s1/src/fs/fuse/inode.c:2146:9: note: each undeclared identifier is reported only once for each function it appears in
/cache/work/s1/src/fs/fuse/inode.c:2147:1: warning: no return statement in function returning non-void [-Wreturn-type]
make[5]: *** [/cache/work/s1/src/scripts/Makefile.build:287: fs/fuse/inode.o] Error 1
In file included from ../src/include/linux/fs.h:3:
../src/include/linux/x.h:10:2: fatal error: y.h: No such file or directory
   10 | #include "y.h"
      |          ^~~~~
compilation terminated.
make[4]: *** [/cache/work/s1/src/scripts/Makefile.build:544: fs/fuse] Error 2
ld: vmlinux.o: in function 'f':
ld: fs/fuse/dev.o:(.text+0x10): undefined reference to 'gone'
make[1]: *** [/cache/work/s1/src/Makefile:2000: .] Error 2
`

func TestFirstErrors(t *testing.T) {
	errs := FirstErrors([]byte(failedLog), "/cache/work/s1/src", "/cache/work/s1/out", 5)
	var got []string
	for _, e := range errs {
		got = append(got, e.String())
	}
	want := []string{
		"fs/fuse/inode.c:2146:9: error: 'hello' undeclared (first use in this function)\n" +
			"     2146 |         hello = 1;\n" +
			"          |         ^~~~~\n" +
			"    /cache/work/s1/src/fs/fuse/inode.c:2146:9: note: each undeclared identifier is reported only once for each function it appears in",
		"include/linux/x.h:10:2: error: y.h: No such file or directory\n" +
			"       10 | #include \"y.h\"\n" +
			"          |          ^~~~~",
		"ld: fs/fuse/dev.o:(.text+0x10): undefined reference to 'gone'",
	}
	if strings.Join(got, "\n--\n") != strings.Join(want, "\n--\n") {
		t.Errorf("FirstErrors:\n%s\nwant:\n%s", strings.Join(got, "\n--\n"), strings.Join(want, "\n--\n"))
	}
	if n := len(FirstErrors([]byte(failedLog), "/cache/work/s1/src", "/cache/work/s1/out", 1)); n != 1 {
		t.Errorf("limit 1 gave %d errors", n)
	}
	// No compiler message: make's own error line.
	errs = FirstErrors([]byte("  LD      vmlinux\nmake[1]: *** [Makefile:1: vmlinux] Error 139\n"), "/s", "/o", 3)
	if len(errs) != 1 || errs[0].Msg != "make[1]: *** [Makefile:1: vmlinux] Error 139" {
		t.Errorf("fallback = %+v", errs)
	}
	be := &BuildError{Target: "bzImage", Errors: FirstErrors([]byte(failedLog), "/cache/work/s1/src", "/cache/work/s1/out", 3), Log: "/cache/work/s1/build.log"}
	if msg := be.Error(); !strings.HasPrefix(msg, "make bzImage failed; first errors:\n  fs/fuse/inode.c:2146:9: error: 'hello'") ||
		!strings.HasSuffix(msg, "full log: /cache/work/s1/build.log") {
		t.Errorf("BuildError:\n%s", msg)
	}
}

func TestProgressPlainLines(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, false)
	p.begin("build:x", 20)
	sink := &lineSink{log: &bytes.Buffer{}, prog: p}
	w := sink.writer()
	for i := 0; i < 25; i++ {
		// Lines arrive split across writes.
		w.Write([]byte("  CC      fs/f"))
		w.Write([]byte("use/x.o\nnot a step\n"))
	}
	sink.flush()
	if p.steps() != 25 {
		t.Errorf("steps = %d, want 25", p.steps())
	}
	p.end("done")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	// 10%, 20%, ... 90% (capped at 99% while running), then the summary.
	if len(lines) != 10 || !strings.HasPrefix(lines[0], "build:x: 10% (2/~20 steps)") || lines[9] != "done" {
		t.Errorf("progress lines:\n%s", buf.String())
	}
	if strings.Contains(buf.String(), "\r") {
		t.Error("plain progress uses carriage returns")
	}
}

func TestProgressTerminalBar(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, true)
	p.begin("build:x", 4)
	p.step("CC", "fs/fuse/dev.o")
	p.end("")
	if out := buf.String(); !strings.Contains(out, "\r\x1b[Kbuild:x [") || !strings.Contains(out, "25%") ||
		!strings.Contains(out, "CC fs/fuse/dev.o") || !strings.HasSuffix(out, "\r\x1b[K") {
		t.Errorf("bar = %q", out)
	}
}
