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
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"klab/images/apt"
	"klab/internal/paths"
	"klab/internal/specfile"
	"klab/internal/suggest"
	"klab/internal/textsafe"
	"klab/lab"
	"klab/lab/hostguest"
)

// globalOptions are the flags every command shares.
type globalOptions struct {
	cacheDir string
	runsDir  string
	mirror   string
	verbose  bool
	// args is the command line klab runs with (without the program
	// name), for the hints of flag errors.
	args []string
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
  klab bisect --tree ~/linux --good v7.3 --bad HEAD --splat "WARNING in fuse_open" fuse-transport
  klab doctor`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.cacheDir, "cache-dir", paths.CacheDir(), "cache for kernels and initramfs images (env KLAB_CACHE_DIR)")
	pf.StringVar(&g.runsDir, "runs-dir", paths.RunsDir(), "where runs are saved (env KLAB_RUNS_DIR)")
	pf.StringVar(&g.mirror, "debian-mirror", "", "Debian archive URI (env KLAB_DEBIAN_MIRROR; default: the host's apt sources)")
	pf.BoolVarP(&g.verbose, "verbose", "v", false, "print more progress")
	// Global flags are checked before any command does any work.
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := g.check(cmd); err != nil {
			return badInput(err)
		}
		return nil
	}
	root.Version = versionLine()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return flagError(cmd, err, g.args) })
	root.AddCommand(
		newKernelsCommand(g),
		newCacheCommand(g),
		newBootCommand(g, nil),
		newShellCommand(g, nil),
		newDoctorCommand(g),
		newInitramfsCommand(g),
		newUserspaceCommand(g),
		newFuseCommand(g),
		newSplatsCommand(g),
		newRunCommand(g),
		newExperimentsCommand(),
		newReportCommand(g),
		newRunsCommand(g),
		newCompareCommand(g),
		newRerunCommand(g),
		newMatrixCommand(g),
		newBisectCommand(g, nil),
		newFstestsCommand(g, nil),
		newResultsCommand(g),
		newVersionCommand(),
	)
	// Cobra adds these when it runs; added now, they get the same
	// treatment as klab's own commands below.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	strictHelp(root)
	strictCommands(root, g)
	setupCompletion(root, g)
	return root
}

// check returns every problem of the global flags for cmd, before cmd
// does any work: a Debian mirror that is not a usable URI (from
// --debian-mirror, else $KLAB_DEBIAN_MIRROR), even when the command
// turns out not to need the archive; and a cache or runs directory that
// another user could have made (see internal/paths), for the commands
// that may write into them. Help and completion run whatever the flags.
func (g *globalOptions) check(cmd *cobra.Command) error {
	if aboutKlab(cmd) {
		return nil
	}
	var errs []error
	if m := strings.TrimSpace(g.mirror); m != "" {
		if _, err := apt.CheckMirrorURI(m); err != nil {
			errs = append(errs, fmt.Errorf("--debian-mirror %w", err))
		}
	} else if m := strings.TrimSpace(os.Getenv(apt.MirrorEnv)); m != "" {
		if _, err := apt.CheckMirrorURI(m); err != nil {
			errs = append(errs, fmt.Errorf("%s %w", apt.MirrorEnv, err))
		}
	}
	if usesDirs(cmd) {
		if err := paths.Check("cache directory", g.cacheDir, "--cache-dir", "KLAB_CACHE_DIR"); err != nil {
			errs = append(errs, err)
		}
		if err := paths.Check("runs directory", g.runsDir, "--runs-dir", "KLAB_RUNS_DIR"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// aboutKlab reports whether cmd is one of the commands about klab itself
// (version, help, completion), which run even when the global flags are
// wrong.
func aboutKlab(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		switch c.Name() {
		case "version", "help", "completion", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
			return true
		}
	}
	return false
}

// usesDirs reports whether cmd may write into the cache or runs
// directory. Command groups, help, version, completion and the commands
// that only read experiment or matrix files run even when those
// directories are unsafe.
func usesDirs(cmd *cobra.Command) bool {
	if cmd.Annotations[groupAnnotation] != "" || aboutKlab(cmd) {
		return false // a group only prints its help or fails; help needs neither
	}
	switch cmd.Name() {
	case "experiments", "validate", "plan", "emit", "cache-key":
		return false
	case "list", "show":
		return cmd.Parent() == nil || cmd.Parent().Name() != "experiments"
	}
	return true
}

// groupAnnotation marks the commands that only hold subcommands.
const groupAnnotation = "klab:group"

// strictCommands makes every mistyped command line an error with the
// status of bad input, 2, on every command: a command group (klab
// kernels, klab fuse check, ...) given an unknown subcommand fails with
// suggestions instead of printing its help, and argument errors are bad
// input.
func strictCommands(c *cobra.Command, g *globalOptions) {
	switch {
	case c.HasSubCommands() && !c.Runnable():
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[groupAnnotation] = "true"
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			return badInput(unknownCommand(cmd, args[0]))
		}
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	case c.Args != nil:
		validate := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := validate(cmd, args)
			if err == nil {
				return nil
			}
			msg := err.Error()
			if h := guestHint(cmd, g.args); h != "" && len(args) > 0 {
				msg += ": " + h
			}
			return &exitError{code: exitBadInput, msg: msg}
		}
	}
	for _, sub := range c.Commands() {
		strictCommands(sub, g)
	}
}

// strictHelp makes klab help TOPIC... refuse a topic that is no command
// (status 2, with suggestions) instead of printing the usage and
// succeeding.
func strictHelp(root *cobra.Command) {
	for _, help := range root.Commands() {
		if help.Name() != "help" || help.Run == nil {
			continue
		}
		show := help.Run
		help.Run = nil
		help.RunE = func(cmd *cobra.Command, args []string) error {
			c := cmd.Root()
			for _, a := range args {
				next := subcommand(c, a)
				if next == nil {
					return badInput(unknownCommand(c, a))
				}
				c = next
			}
			show(cmd, args)
			return nil
		}
	}
}

// subcommand is c's subcommand called name (or one of its aliases), or nil.
func subcommand(c *cobra.Command, name string) *cobra.Command {
	for _, sub := range c.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// unknownCommand says that group has no subcommand name, and what it has.
func unknownCommand(group *cobra.Command, name string) error {
	if group.SuggestionsMinimumDistance <= 0 {
		group.SuggestionsMinimumDistance = 2
	}
	msg := fmt.Sprintf("unknown command %q for %q", name, group.CommandPath())
	if s := group.SuggestionsFor(name); len(s) > 0 {
		return fmt.Errorf("%s; did you mean %s?", msg, orList(s))
	}
	var names []string
	for _, c := range group.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	if len(names) > 8 {
		return fmt.Errorf("%s (%s --help lists the commands)", msg, group.CommandPath())
	}
	return fmt.Errorf("%s; want %s", msg, orList(names))
}

// flagError is cobra's flag error as bad input, with a hint when the flag
// came after a guest command given without "--" (klab boot --kernel
// debian:7.3 uname -r), else, for a flag cmd does not have, the flags it
// has that are nearest ("unknown flag: --round (did you mean
// --rounds?)").
func flagError(cmd *cobra.Command, err error, argv []string) error {
	msg := err.Error()
	if len(cmd.Flags().Args()) > 0 {
		if h := guestHint(cmd, argv); h != "" {
			return &exitError{code: exitBadInput, msg: msg + ": " + h}
		}
	}
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		if s := flagSuggestions(cmd, ne); len(s) > 0 {
			msg += " (did you mean " + orList(s) + "?)"
		}
	}
	return &exitError{code: exitBadInput, msg: msg}
}

// flagSuggestions are the flags of cmd (its own and those it inherits,
// hidden and deprecated ones left out) nearest to the unknown flag of
// err, with their dashes: for --name the long flags near name; for a
// group of short flags that is a long flag's name given with one dash
// (-rounds), that flag.
func flagSuggestions(cmd *cobra.Command, err *pflag.NotExistError) []string {
	var names []string
	seen := map[string]bool{}
	add := func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" && !seen[f.Name] {
			seen[f.Name] = true
			names = append(names, f.Name)
		}
	}
	cmd.Flags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	word := err.GetSpecifiedName()
	if short := err.GetSpecifiedShortnames(); short != "" {
		// -Z, -vZ: a mistyped letter has no near neighbour to name.
		if len(short) < 3 || strings.Contains(short, "=") {
			return nil
		}
		word = short
	}
	var out []string
	for _, n := range suggest.Nearest(word, names) {
		out = append(out, "--"+n)
	}
	if err.GetSpecifiedShortnames() != "" && slices.Contains(names, word) {
		out = []string{"--" + word}
	}
	return out
}

// guestHint tells how to run a guest command, for a command line argv
// that gave one to cmd without "--"; it is empty for commands that take
// none.
func guestHint(cmd *cobra.Command, argv []string) string {
	switch cmd.CommandPath() {
	case "klab boot":
		return "put the guest command after --, e.g. " + withDash(cmd, argv, "boot")
	case "klab shell":
		return "klab shell runs no command; to run one: " + withDash(cmd, argv, "boot")
	}
	return ""
}

// withDash rewrites argv, a command line of cmd, as klab <name> with "--"
// before the guest command: the first argument that is neither cmd's name
// nor a flag or a flag's value.
func withDash(cmd *cobra.Command, argv []string, name string) string {
	path := strings.Fields(cmd.CommandPath())[1:]
	head := []string{"klab"}
	fs := cmd.Flags()
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--":
			continue
		case len(a) > 1 && a[0] == '-':
			head = append(head, a)
			if takesValue(fs, a) && i+1 < len(argv) {
				i++
				head = append(head, argv[i])
			}
			continue
		case len(path) > 0 && a == path[0]:
			if len(path) == 1 {
				a = name
			}
			path = path[1:]
			head = append(head, a)
			continue
		}
		var guest []string
		for _, g := range argv[i:] {
			if g != "--" {
				guest = append(guest, g)
			}
		}
		return shellJoin(head) + " -- " + shellJoin(guest)
	}
	return shellJoin(head) + " -- COMMAND"
}

// takesValue reports whether the flag argument a ("--kernel", "-k",
// "-vk") is followed by its value as the next argument.
func takesValue(fs *pflag.FlagSet, a string) bool {
	needs := func(f *pflag.Flag) bool { return f != nil && f.NoOptDefVal == "" }
	if name, ok := strings.CutPrefix(a, "--"); ok {
		return !strings.Contains(name, "=") && needs(fs.Lookup(name))
	}
	for i, c := range a[1:] {
		f := fs.ShorthandLookup(string(c))
		if f == nil {
			return false
		}
		if needs(f) {
			return i == len(a)-2 // the value is the rest of a, else the next argument
		}
	}
	return false
}

// shellJoin joins args into a command line a POSIX shell reads back as
// args: words of plain characters stay bare, others are single-quoted,
// each ' in them ending the quotes, escaped with a backslash, and opening
// them again. The first word is quoted when it has a '=', which would
// make it an assignment.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		plain := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=.,:/@%"
		if i == 0 {
			plain = strings.ReplaceAll(plain, "=", "")
		}
		if a != "" && strings.Trim(a, plain) == "" {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

func main() {
	// klab's executable is also the agent of a host run (--kernel host)
	// and that agent's workload children.
	if code, ok := hostguest.Main(os.Args); ok {
		os.Exit(code)
	}
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
	g.args = args
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
				fmt.Fprintln(stderr, "klab:", textsafe.Clean(ee.msg))
			}
			return ee.code
		}
		// Input that is wrong before anything runs names options as
		// the libraries do: say which flag each is.
		var badErr *specfile.BadInputError
		bad := errors.As(err, &badErr)
		if bad {
			err = flagNames(err)
		}
		msg := err.Error()
		if errors.Is(err, apt.ErrNoMirror) {
			msg += "; or give --debian-mirror URI"
		}
		// Errors may quote the guest or a kernel image: no escape
		// sequences reach the terminal.
		fmt.Fprintln(stderr, "klab:", textsafe.Clean(msg))
		if bad {
			return exitBadInput
		}
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
	return textsafe.OneLine(s)
}

// quietWriter discards verbose output.
type quietWriter struct{}

func (quietWriter) Write(p []byte) (int, error) { return len(p), nil }
