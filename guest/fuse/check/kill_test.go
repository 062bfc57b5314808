package check_test

import (
	"context"
	"os"
	"testing"

	"klab/guest/fuse/check"
	"klab/guest/fuse/cli"
	"klab/guest/fuse/ringfuse"
	"klab/internal/testenv"
)

// serveEnv makes the test binary act as `klab-agent fuse ...`, so that
// the kill check has a server process to kill.
const serveEnv = "KLAB_FUSE_CHECK_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" && len(os.Args) > 1 && os.Args[1] == "fuse" {
		os.Exit(cli.Main("check.test", os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestKill(t *testing.T) {
	testenv.RequiresFUSE(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, transport := range []string{"dev", "uring"} {
		t.Run(transport, func(t *testing.T) {
			if transport == "uring" {
				if _, err := ringfuse.EnableURing(); err != nil {
					testenv.Missingf(t, "the kernel has no FUSE-over-io_uring: %v", err)
				}
			}
			r, err := check.Kill(context.Background(), check.KillOptions{
				ServerArgv: []string{exe, "fuse", "serve"},
				ServerEnv:  []string{serveEnv + "=1"},
				Transport:  transport,
				Dir:        t.TempDir(),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			if !r.Pass {
				t.Error(r.Problems)
			}
		})
	}
}
