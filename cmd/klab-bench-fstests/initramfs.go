package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/u-root/mkuimage/cpio"
)

// modulesPrefix is where klab's initramfs keeps its modules, with their
// load order and the spare ones (brd).
const modulesPrefix = "lib/klab/modules"

// bareInitramfs writes the bare guest's initramfs into dir: bareinit
// built static as /init, the modules of klab's initramfs at klabInitrd,
// and under /bench the local.config, the tests and brd's parameters.
func bareInitramfs(klabInitrd, dir string, tests []string, brd string) (string, error) {
	bin := filepath.Join(dir, "bareinit")
	cmd := exec.Command("go", "build", "-o", bin, "klab/cmd/klab-bench-fstests/bareinit")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build bareinit: %w\n%s", err, out)
	}
	init, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	mods, err := moduleRecords(klabInitrd)
	if err != nil {
		return "", err
	}
	recs := []cpio.Record{
		cpio.Directory("dev", 0o755), cpio.Directory("proc", 0o755), cpio.Directory("sys", 0o755),
		cpio.Directory("lib", 0o755), cpio.Directory("lib/klab", 0o755), cpio.Directory(modulesPrefix, 0o755),
		cpio.StaticFile("init", string(init), 0o755),
		cpio.Directory("bench", 0o755),
		cpio.StaticFile("bench/local.config", localConfig, 0o644),
		cpio.StaticFile("bench/tests", strings.Join(tests, "\n")+"\n", 0o644),
		cpio.StaticFile("bench/brd", brd+"\n", 0o644),
	}
	recs = append(recs, mods...)
	path := filepath.Join(dir, "bare-fstests.cpio")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	w := cpio.Newc.Writer(f)
	if err := cpio.WriteRecords(w, recs); err != nil {
		return "", err
	}
	if err := cpio.WriteTrailer(w); err != nil {
		return "", err
	}
	return path, f.Close()
}

// moduleRecords returns the regular files under modulesPrefix in the
// initramfs at path, which may be several newc archives one after the
// other (klab's base and its own part).
func moduleRecords(path string) ([]cpio.Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var recs []cpio.Record
	const hdr = 110
	for off := 0; ; {
		i := bytes.Index(b[off:], []byte("070701"))
		if i < 0 {
			break
		}
		off += i
		if off+hdr > len(b) {
			return nil, fmt.Errorf("%s: short cpio header at %d", path, off)
		}
		field := func(n int) int {
			v, _ := strconv.ParseUint(string(b[off+6+8*n:off+14+8*n]), 16, 32)
			return int(v)
		}
		mode, size, nameSize := field(1), field(6), field(11)
		nameEnd := off + hdr + nameSize
		data := (nameEnd + 3) &^ 3
		if nameSize == 0 || data+size > len(b) {
			return nil, fmt.Errorf("%s: bad cpio record at %d", path, off)
		}
		name := string(b[off+hdr : nameEnd-1])
		if strings.HasPrefix(name, modulesPrefix+"/") && mode&0o170000 == 0o100000 {
			recs = append(recs, cpio.StaticFile(name, string(b[data:data+size]), 0o644))
		}
		off = (data + size + 3) &^ 3
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s has no %s", path, modulesPrefix)
	}
	return recs, nil
}
