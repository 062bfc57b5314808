package images

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"klab/guest/proto"
	"klab/images/keyed"
	"klab/internal/proc"
)

// LibfuseExamplesDir is where Debian's libfuse3-dev installs libfuse's
// example sources.
const LibfuseExamplesDir = "/usr/share/doc/libfuse3-dev/examples"

// libfuseHint says what to install when building passthrough_ll fails.
const libfuseHint = "install the host's libfuse example sources and a compiler: apt-get install libfuse3-dev gcc pkg-config"

// BuildPassthroughLL compiles libfuse's passthrough_ll example, the
// seeds' reference FUSE server, with gcc against the host's libfuse3
// (pkg-config fuse3), from the sources in LibfuseExamplesDir. The binary is
// cached under cacheDir/libfuse, keyed by the source, the compiler's
// version and the pkg-config flags (see keyed.Cache); the result is its
// path, a file named passthrough_ll.
func BuildPassthroughLL(ctx context.Context, cacheDir string, log io.Writer) (string, error) {
	src, err := readExample("passthrough_ll.c")
	if err != nil {
		return "", err
	}
	// Newer libfuse examples include this header; older ones do not.
	helpers, err := readExample("passthrough_helpers.h")
	if err != nil {
		helpers = nil
	}
	for _, tool := range []string{"gcc", "pkg-config"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("build passthrough_ll: %s not found: %s", tool, libfuseHint)
		}
	}
	cflags, err := proc.Run(ctx, proc.Opts{Timeout: time.Minute}, "pkg-config", "--cflags", "--libs", "fuse3")
	if err != nil {
		return "", fmt.Errorf("build passthrough_ll: pkg-config fuse3: %w (%s)", err, libfuseHint)
	}
	gccVersion, err := proc.Run(ctx, proc.Opts{Timeout: time.Minute}, "gcc", "-dumpfullversion", "-dumpversion")
	if err != nil {
		return "", fmt.Errorf("build passthrough_ll: gcc: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "passthrough_ll/v1\n%s\n%s\n", strings.TrimSpace(string(gccVersion)), strings.TrimSpace(string(cflags)))
	h.Write(src)
	fmt.Fprintf(h, "\n%d\n", len(helpers))
	h.Write(helpers)
	key := hex.EncodeToString(h.Sum(nil))[:24]
	logf := func(format string, args ...any) {
		if log != nil {
			fmt.Fprintf(log, format+"\n", args...)
		}
	}
	c := keyed.Cache[string]{Dir: filepath.Join(cacheDir, "libfuse"), What: "passthrough_ll cache", Load: loadLLDir, Logf: logf}
	bin, _, err := c.Get(ctx, key, false, func(context.Context) (keyed.Plan, error) {
		return keyed.Plan{Name: key, Build: func(ctx context.Context, tmp, out string) error {
			if err := os.WriteFile(filepath.Join(tmp, "passthrough_ll.c"), src, 0o644); err != nil {
				return err
			}
			if helpers != nil {
				if err := os.WriteFile(filepath.Join(tmp, "passthrough_helpers.h"), helpers, 0o644); err != nil {
					return err
				}
			}
			logf("building libfuse's passthrough_ll from %s...", LibfuseExamplesDir)
			argv := []string{"gcc", "-Wall", "-O2", "-o", "passthrough_ll", "passthrough_ll.c"}
			argv = append(argv, strings.Fields(string(cflags))...)
			if _, err := proc.Run(ctx, proc.Opts{Dir: tmp, Timeout: 5 * time.Minute}, argv...); err != nil {
				return fmt.Errorf("build passthrough_ll: %w", err)
			}
			return os.Rename(filepath.Join(tmp, "passthrough_ll"), filepath.Join(out, "passthrough_ll"))
		}}, nil
	})
	return bin, err
}

// loadLLDir returns the passthrough_ll binary of a cache entry.
func loadLLDir(dir string) (string, error) {
	bin := filepath.Join(dir, "passthrough_ll")
	fi, err := os.Stat(bin)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", bin)
	}
	return bin, nil
}

// readExample reads a libfuse example source, plain or gzipped.
func readExample(name string) ([]byte, error) {
	p := filepath.Join(LibfuseExamplesDir, name)
	b, err := os.ReadFile(p)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	f, gerr := os.Open(p + ".gz")
	if gerr != nil {
		return nil, fmt.Errorf("libfuse example %s not found: %s", p, libfuseHint)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s.gz: %w", p, err)
	}
	b, err = io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("%s.gz: %w", p, err)
	}
	return b, nil
}

// PassthroughLLFiles builds passthrough_ll (BuildPassthroughLL) and
// returns it with its shared-library closure, for InitramfsOptions.Extra:
// the binary lands at proto.LibfusePassthroughLLPath, where the agent's
// fuse step looks for it (server libfuse-passthrough_ll).
func PassthroughLLFiles(ctx context.Context, cacheDir string, log io.Writer) ([]ExtraFile, error) {
	bin, err := BuildPassthroughLL(ctx, cacheDir, log)
	if err != nil {
		return nil, err
	}
	return programAt(bin, proto.LibfusePassthroughLLPath)
}

// programAt returns host program bin with its shared-library closure, the
// program itself at guest path dest.
func programAt(bin, dest string) ([]ExtraFile, error) {
	files, err := HostProgram(bin, LibSearch{})
	if err != nil {
		return nil, err
	}
	for i := range files {
		if files[i].Source == bin {
			files[i].Dest = dest
		}
	}
	return files, nil
}
