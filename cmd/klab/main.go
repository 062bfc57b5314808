// Command klab boots Linux kernels in QEMU guests with a u-root initramfs
// and a Go agent, runs work in them, and saves what happened.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"klab/internal/paths"
	"klab/lab"
	"klab/results/report"
)

// globalOptions are the flags every command shares.
type globalOptions struct {
	cacheDir string
	runsDir  string
	mirror   string
	verbose  bool
}

func newRootCommand() *cobra.Command {
	return newRootCommandWith(&globalOptions{})
}

func newRootCommandWith(g *globalOptions) *cobra.Command {
	root := &cobra.Command{
		Use:   "klab",
		Short: "Evaluate Linux kernel patches in QEMU guests",
		Long: `klab boots real kernels (Debian packages or your own bzImage) in QEMU with a
u-root initramfs and a Go guest agent, runs commands in the guest, watches the
console for kernel splats, and saves every run with a manifest that is enough
to repeat it.`,
		Example: `  klab run fuse-transport --kernel debian:7.3
  klab run my-exp.yaml --kernel debian:7.3 --kernel build:fix
  klab kernels fetch debian:7.3
  klab boot --kernel debian:7.3 -- uname -r
  klab boot --kernel ./arch/x86/boot/bzImage -- cat /proc/version
  klab shell --kernel debian:7.3
  klab doctor`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.cacheDir, "cache-dir", paths.CacheDir(), "cache for kernels and initramfs images (env KLAB_CACHE_DIR)")
	pf.StringVar(&g.runsDir, "runs-dir", paths.RunsDir(), "where runs are saved (env KLAB_RUNS_DIR)")
	pf.StringVar(&g.mirror, "debian-mirror", "", "Debian archive URI (env KLAB_DEBIAN_MIRROR; default: the host's apt sources)")
	pf.BoolVarP(&g.verbose, "verbose", "v", false, "print more progress")
	// The cache and runs directories are checked before any command that
	// may write into them: klab never uses one another user could have
	// made (see internal/paths).
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		switch cmd.Name() {
		case "version", "help", "completion", "experiments", "list", "show", "validate", "plan", "emit", "cache-key":
			if cmd.Name() == "list" || cmd.Name() == "show" {
				if p := cmd.Parent(); p == nil || p.Name() != "experiments" {
					break
				}
			}
			return nil
		}
		if err := paths.Check("cache directory", g.cacheDir, "--cache-dir", "KLAB_CACHE_DIR"); err != nil {
			return badInput(err)
		}
		if err := paths.Check("runs directory", g.runsDir, "--runs-dir", "KLAB_RUNS_DIR"); err != nil {
			return badInput(err)
		}
		return nil
	}
	root.AddCommand(
		newKernelsCommand(g),
		newBootCommand(g),
		newShellCommand(g),
		newDoctorCommand(g),
		newInitramfsCommand(g),
		newFuseCommand(g),
		newSplatsCommand(g),
		newRunCommand(g),
		newExperimentsCommand(),
		newReportCommand(g),
		newRunsCommand(g),
		newCompareCommand(g),
		newRerunCommand(g),
		newMatrixCommand(g),
		newResultsCommand(),
		newVersionCommand(),
	)
	return root
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run runs klab with args and returns its exit status. A panic never
// reaches the user as a Go trace: it becomes an error naming what failed,
// with status 125; the stack is printed with --verbose and saved to a file
// otherwise.
func run(args []string, stderr io.Writer) int {
	g := &globalOptions{}
	return runRoot(newRootCommandWith(g), g, args, stderr)
}

func runRoot(root *cobra.Command, g *globalOptions, args []string, stderr io.Writer) (code int) {
	root.SetArgs(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer func() {
		if r := recover(); r != nil {
			code = lab.ExitInfra
			stack := debug.Stack()
			fmt.Fprintf(stderr, "klab: internal error: %v\n", r)
			if g.verbose {
				stderr.Write(stack)
				return
			}
			if f, err := os.CreateTemp(g.cacheDir, "crash-*.log"); err == nil {
				fmt.Fprintf(f, "klab %s\ninternal error: %v\n%s", strings.Join(args, " "), r, stack)
				f.Close()
				fmt.Fprintf(stderr, "klab: the stack is in %s (or run again with --verbose)\n", f.Name())
			} else {
				fmt.Fprintln(stderr, "klab: run again with --verbose to see the stack")
			}
		}
	}()
	err := root.ExecuteContext(ctx)
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(stderr, "klab:", report.Clean(ee.msg))
			}
			return ee.code
		}
		// Errors may quote the guest or a kernel image: no escape
		// sequences reach the terminal.
		fmt.Fprintln(stderr, "klab:", report.Clean(err.Error()))
		return lab.ExitCode(err)
	}
	return 0
}

// exitError ends klab with a given status, printing msg when not empty.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d: %s", e.code, e.msg) }

func (g *globalOptions) labOptions() lab.Options {
	o := lab.Options{CacheDir: g.cacheDir, RunsDir: g.runsDir, Mirror: g.mirror, Log: os.Stderr}
	if !g.verbose {
		o.Log = quietWriter{}
	}
	o.Progress = os.Stderr
	return o
}

// shown is s as printed on a terminal: one line, without control
// characters. Kernel versions come from kernel images, splat titles and
// releases from the guest: none is trusted.
func shown(s string) string {
	return strings.Join(strings.Fields(report.Clean(s)), " ")
}

// quietWriter discards verbose output.
type quietWriter struct{}

func (quietWriter) Write(p []byte) (int, error) { return len(p), nil }
