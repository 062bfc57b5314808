package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"klab/images"
	"klab/images/debian"
	"klab/internal/units"
	"klab/lab"
	"klab/results/splat"
)

// guestOptions are the flags klab boot and klab shell share: the kernel,
// the accelerator and the guest's shape.
type guestOptions struct {
	kernel  string
	accel   string
	memMB   int
	cpus    int
	cmdline string
	flavour string
}

// checkGuest returns the problems of o's flags, before any work: a
// missing or unusable kernel reference (one of no known form, a debian:
// one that does not parse, a build: name not built, a path that is not a
// bzImage), an unknown accelerator or flavour; example shows a --kernel.
func (o *guestOptions) checkGuest(g *globalOptions, example string) []error {
	var errs []error
	if err := checkFlavour(o.flavour); err != nil {
		errs = append(errs, err)
	}
	if o.kernel == "" {
		errs = append(errs, fmt.Errorf("--kernel is required, e.g. %s", example))
	} else if err := checkKernelRef(g, o.kernel, o.flavour); err != nil {
		errs = append(errs, err)
	}
	if err := checkAccel(o.accel); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// labOptions are g's lab options with o's accelerator and flavour.
func (o *guestOptions) labOptions(g *globalOptions) lab.Options {
	lo := g.labOptions()
	lo.Accel = o.accel
	lo.Flavour = o.flavour
	return lo
}

// bootOptions are klab boot's flags, bound to its fields, and the rest of
// its command line.
type bootOptions struct {
	guestOptions
	console     bool
	sysctls     []string
	timeout     int
	bootTimeout int
	allow       []string
	noFail      bool
	mttcg       bool
	icount      string
	files, dirs []string
	modules     []string
	shares      []string
	noStdin     bool
	build       bool
	config      []string
	asJSON      bool
	runID       string
	runDir      string
	maxOutput   int // MiB
	// maxOutputSet is set when --max-output was given: it then caps
	// console.log too.
	maxOutputSet bool
	// userspace names the userspace the command runs chrooted into
	// (--userspace): defaultUserspace or an image id.
	userspace string

	// argv is the guest command, given after "--".
	argv []string
	// in, out and errOut are klab's standard streams; command is klab's
	// own argv, for the manifest.
	in          io.Reader
	out, errOut io.Writer
	command     []string
}

// newBootCommand returns klab boot. Once the flags are checked, the
// command calls runF, or runBoot when runF is nil: tests pass their own,
// so that flag handling is tested without QEMU.
func newBootCommand(g *globalOptions, runF func(context.Context, *bootOptions) error) *cobra.Command {
	o := &bootOptions{}
	if runF == nil {
		runF = func(ctx context.Context, o *bootOptions) error { return runBoot(ctx, g, o) }
	}
	cmd := &cobra.Command{
		Use:   "boot --kernel REF [flags] [-- COMMAND [ARG...]]",
		Short: "Boot a kernel and run one command in the guest",
		Long: `Boot a kernel in a QEMU guest with klab's initramfs, run one command in the
guest through the agent, stream its output, and exit with its status.

The kernel is debian:<series> (` + strings.Join(debian.Series(), ", ") + `), an exact Debian package
version (debian:7.3.4+deb13), build:<name> (from klab kernels build), the
path of a bzImage, or a kernel tree built in place (. or tree:DIR): its own
arch/x86/boot/bzImage, .config and modules. With --build, klab builds the
tree first, as it is (uncommitted changes included), in its own cache and
incrementally, without writing into the tree: the edit-build-boot loop in
one command.

Your own programs and data go in with --file and --dir; an ELF program
brings its shared libraries. Without a guest path they land in /work, where
the command then runs. Large trees are better shared than copied: --share
HOST:GUEST mounts a host directory over virtio-9p (read-only; :rw lets the
guest write to it), on kernels built with 9p (Debian's generic flavour,
--flavour amd64; not its cloud kernels). The command's standard input is
klab's own.

Every run is saved under --runs-dir (or --run-dir) with manifest.json,
console.log, events.jsonl, splats.json, and the command's output in
stdout.log and stderr.log (up to --max-output each); --json prints a
summary of the run on stdout (the guest's output then goes to stderr).

A kernel report on the console (BUG, KASAN, lockdep, panic, or a WARNING not
allowed with --allow-warning) fails the run even when the command succeeded.

Exit status: the command's own status, whatever it is (0 to 255), once the
guest ran it; 2 when klab refused the command line before booting anything
(an unknown flag, a missing --kernel, a value it does not take, a kernel
reference that names no kernel); 124 when the command ran past --timeout;
125 when klab or the host failed (no QEMU, no mirror, a kernel it cannot
fetch or boot); 126 when the kernel failed (panic, hang, or it never reached
the agent); 127 when the command could not be started in the guest; 1 when
another step failed. --json tells the command's status (exit_code) from
klab's (klab_exit).`,
		Example: `  klab boot --kernel debian:7.3 -- uname -r
  klab boot --kernel . --build -- cat /proc/version
  klab boot --kernel . --file tools/testing/selftests/filesystems/fuse/fusectl_test -- ./fusectl_test
  klab boot --kernel debian:7.3 --flavour amd64 --share .:/src -- ls /src
  echo hi | klab boot --kernel debian:7.3 -- cat
  klab boot --kernel debian:7.3 --json --run-id ci-42 -- true
  klab boot --kernel debian:7.3 --console -- true
  klab boot --kernel debian:7.3 --userspace -- bash -c 'xfs_io -V; id fsgqa'
  klab boot --kernel ./arch/x86/boot/bzImage -- cat /proc/version
  klab boot --kernel debian:7.3 --sysctl fs.fuse.default_request_timeout=30 -- cat /proc/sys/fs/fuse/default_request_timeout
  klab boot --kernel debian:7.3 --icount shift=0,sleep=off --file ./mybench -- ./mybench`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				// Without "--", the guest command's own flags would be
				// taken as klab's (klab boot ... ls -v is --verbose).
				return badInput(fmt.Errorf("the guest command goes after --, e.g. %s", withDash(cmd, g.args, "boot")))
			}
			o.argv = args
			o.maxOutputSet = cmd.Flags().Changed("max-output")
			o.in, o.out, o.errOut, o.command = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), os.Args
			if err := o.check(g); err != nil {
				return badInput(err)
			}
			return runF(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.kernel, "kernel", "k", "", "kernel: debian:<series>, debian:<package version>, build:<name>, a bzImage path, or a built kernel tree (. or tree:DIR)")
	f.StringVar(&o.accel, "accel", "auto", "accelerator: auto (prove KVM, else TCG), kvm or tcg")
	f.VarP(newMiBValue(1024, &o.memMB), "memory", "m", "guest memory: MiB, or a size with a unit K, M, G or T (512M, 2G, 1.5GiB)")
	f.IntVar(&o.cpus, "cpus", 2, "guest vCPUs")
	f.BoolVar(&o.console, "console", false, "also print the guest console to stderr")
	f.StringVar(&o.cmdline, "append", "", "extra kernel command line")
	f.StringArrayVar(&o.sysctls, "sysctl", nil, "write KEY=VALUE under /proc/sys before the command (repeatable)")
	f.IntVar(&o.timeout, "timeout", 0, "command timeout in seconds under KVM, scaled under TCG (default 600)")
	f.IntVar(&o.bootTimeout, "boot-timeout", 0, "seconds from QEMU start to the agent under KVM, scaled under TCG (default 30)")
	f.StringArrayVar(&o.allow, "allow-warning", nil, "a WARNING title substring (or /regexp/) that does not fail the run (repeatable)")
	f.StringVar(&o.icount, "icount", "", "instruction-counted guest time: QEMU's -icount options, e.g. shift=0,sleep=off (TCG; the guest's clocks then count its instructions, so that host load does not move a measurement)")
	f.BoolVar(&o.mttcg, "tcg-multithread", false, "under TCG, one host thread per vCPU (faster for parallel work; QEMU 7.2 then sometimes shows a false \"Oops: int3\")")
	f.BoolVar(&o.noFail, "no-splat-fail", false, "report kernel splats but never fail the run because of them")
	f.StringVar(&o.flavour, "flavour", "cloud-amd64", "Debian kernel flavour: cloud-amd64 or amd64")
	f.StringArrayVar(&o.files, "file", nil, "copy a host file into the guest: HOST[:GUEST] (default /work/NAME); ELF programs bring their libraries (repeatable)")
	f.StringArrayVar(&o.dirs, "dir", nil, "copy a host directory tree into the guest: HOST[:GUEST] (default /work/NAME) (repeatable)")
	f.StringArrayVar(&o.shares, "share", nil, "mount a host directory in the guest over virtio-9p: HOST:GUEST, read-only, or HOST:GUEST:rw (repeatable; the kernel needs CONFIG_9P_FS and CONFIG_NET_9P_VIRTIO, e.g. --flavour amd64)")
	f.StringArrayVar(&o.modules, "module", nil, "also load this kernel module from the kernel's modules, with its dependencies (repeatable)")
	f.BoolVar(&o.noStdin, "no-stdin", false, "give the guest command /dev/null as standard input instead of klab's own")
	f.BoolVar(&o.build, "build", false, "build the kernel tree given with --kernel first (as it is, in klab's cache, incrementally)")
	f.StringArrayVar(&o.config, "config", nil, "with --build: config fragments, comma-separated: lab (default), debug, tree (the tree's own .config) or a file")
	f.BoolVar(&o.asJSON, "json", false, "print a JSON summary of the run on stdout (outcome, exit status, run directory, splats)")
	f.StringVar(&o.runID, "run-id", "", "name of the run directory under --runs-dir (default: a generated one); it must not exist")
	f.Var(newMiBValue(1024, &o.maxOutput), "max-output", "how much of the command's stdout and of its stderr the run keeps (stdout.log, stderr.log; the output still streams whole); given, it caps console.log too (else 64MiB)")
	f.StringVar(&o.runDir, "run-dir", "", "the run directory itself (must not exist): sets --runs-dir and --run-id")
	f.StringVar(&o.userspace, "userspace", "", "run the command chrooted into a Debian userspace on a read-only disk: --userspace alone for the default one (what fstests needs; built when missing), --userspace=ID for one klab userspace build made")
	f.Lookup("userspace").NoOptDefVal = defaultUserspace
	return cmd
}

// check reports every flag that klab boot refuses before it does any
// work: a missing or unusable kernel, values out of their range, and flags
// that do not go together.
func (o *bootOptions) check(g *globalOptions) error {
	errs := o.checkGuest(g, "--kernel debian:7.3 or --kernel ./arch/x86/boot/bzImage")
	if o.icount != "" {
		if err := lab.CheckIcount(o.icount); err != nil {
			errs = append(errs, fmt.Errorf("--icount %w", err))
		}
		if o.accel == "kvm" {
			errs = append(errs, errors.New("--icount needs TCG (QEMU counts instructions only there): drop --accel kvm"))
		}
		if o.mttcg {
			errs = append(errs, errors.New("--icount needs single-threaded TCG: drop --tcg-multithread"))
		}
	}
	if o.runDir != "" && o.runID != "" {
		errs = append(errs, errors.New("give --run-dir or --run-id, not both"))
	}
	if o.userspace != "" && len(o.files)+len(o.dirs)+len(o.shares) > 0 {
		errs = append(errs, errors.New("--userspace runs the command chrooted into the userspace, which --file, --dir and --share do not reach"))
	}
	if !o.build && len(o.config) > 0 {
		errs = append(errs, errors.New("--config goes with --build (the config klab builds the tree with)"))
	}
	if o.maxOutput < 1 {
		errs = append(errs, fmt.Errorf("--max-output %s: want at least 1M", units.FormatMiB(o.maxOutput)))
	}
	return errors.Join(errs...)
}

// request returns the boot request that o describes, with its
// accelerator and, for --run-dir, its runs directory. The kernel of
// --build is not built yet: runBoot builds it.
func (o *bootOptions) request() (lab.BootRequest, error) {
	stdout := o.out
	if o.asJSON {
		stdout = o.errOut
	}
	req := lab.BootRequest{
		Kernel: o.kernel, Argv: o.argv, MemMB: o.memMB, CPUs: o.cpus, Cmdline: o.cmdline,
		Stdout: stdout, Stderr: o.errOut, Command: o.command,
		Modules: o.modules, RunID: o.runID, Accel: o.accel,
		IgnoreSplats: o.noFail, MultiThreadTCG: o.mttcg, Icount: o.icount,
		MaxOutput: int64(o.maxOutput) << 20,
	}
	if o.runDir != "" {
		abs, err := filepath.Abs(o.runDir)
		if err != nil {
			return req, fmt.Errorf("--run-dir %s: %w", o.runDir, err)
		}
		req.RunsDir, req.RunID = filepath.Dir(abs), filepath.Base(abs)
	}
	if !o.noStdin && len(o.argv) > 0 {
		req.Stdin = o.in
	}
	files, err := userFiles(o.files, o.dirs)
	if err != nil {
		return req, err
	}
	req.Files = files
	for _, v := range o.shares {
		sh, err := lab.ParseShare(v)
		if err != nil {
			return req, fmt.Errorf("--share %w", err)
		}
		req.Shares = append(req.Shares, sh)
	}
	if len(o.argv) > 0 && inWorkDir(files) {
		req.Dir = images.UserWorkDir
	}
	for _, s := range o.sysctls {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return req, fmt.Errorf("--sysctl %q: want KEY=VALUE, e.g. fs.fuse.default_request_timeout=30", s)
		}
		req.Sysctls = append(req.Sysctls, lab.Sysctl{Key: k, Value: v})
	}
	if o.timeout > 0 {
		req.StepTimeout = secs(o.timeout)
	}
	if o.bootTimeout > 0 {
		req.BootTimeout = secs(o.bootTimeout)
	}
	if o.maxOutputSet {
		req.MaxConsole = req.MaxOutput
	}
	if len(o.allow) > 0 {
		p, err := splat.NewPolicy(splat.PolicyConfig{Fail: splat.DefaultFail(), Allow: o.allow})
		if err != nil {
			return req, fmt.Errorf("--allow-warning: %w", err)
		}
		req.Policy = p
	}
	if o.console {
		req.Console = o.errOut
	}
	return req, nil
}

// runBoot boots the kernel of o (built first with --build), runs the
// guest command and reports the run.
func runBoot(ctx context.Context, g *globalOptions, o *bootOptions) error {
	req, err := o.request()
	if err != nil {
		return badInput(err)
	}
	lo := o.labOptions(g)
	if o.build {
		k, err := buildTree(ctx, g, o.kernel, o.config)
		if err != nil {
			return err
		}
		req.Kernel, req.Resolved = k.Name, k
	}
	if o.userspace != "" {
		if err := o.attachUserspace(ctx, g, &lo, &req); err != nil {
			return err
		}
	}
	res, err := lo.Boot(ctx, req)
	if o.asJSON && res != nil {
		if jerr := writeJSON(o.out, bootJSON(res, err)); jerr != nil {
			return jerr
		}
	}
	if err != nil {
		return err
	}
	summary(o.errOut, res)
	return bootExit(res)
}

// bootExit ends klab boot with the status of a run that worked: the guest
// command's own, whatever it is. It is never taken for klab's bad input
// (2), which klab finds before it boots.
func bootExit(res *lab.BootResult) error {
	if res.ExitCode != 0 {
		return &exitError{code: res.ExitCode}
	}
	return nil
}

// userFiles turns --file and --dir values into overlay files.
func userFiles(files, dirs []string) ([]images.ExtraFile, error) {
	var paths []images.UserPath
	for _, v := range files {
		p, err := images.ParseUserPath(v, false)
		if err != nil {
			return nil, flagNames(err)
		}
		paths = append(paths, p)
	}
	for _, v := range dirs {
		p, err := images.ParseUserPath(v, true)
		if err != nil {
			return nil, flagNames(err)
		}
		paths = append(paths, p)
	}
	if len(paths) == 0 {
		return nil, nil
	}
	extra, err := images.UserFiles(paths)
	if err != nil {
		return nil, flagNames(err)
	}
	return extra, nil
}

// inWorkDir reports whether any of files goes to images.UserWorkDir (a
// --file or --dir without a guest path): the guest command then runs
// there, so that `--file ./t -- ./t` works. With only explicit guest paths
// the directory does not exist and the command runs in /.
func inWorkDir(files []images.ExtraFile) bool {
	for _, f := range files {
		if strings.HasPrefix(path.Clean("/"+f.Dest), images.UserWorkDir+"/") {
			return true
		}
	}
	return false
}

// bootSummary is what klab boot --json prints.
type bootSummary struct {
	Outcome     string      `json:"outcome"`
	Class       string      `json:"class,omitempty"`
	Message     string      `json:"message,omitempty"`
	ExitCode    int         `json:"exit_code"`
	KlabExit    int         `json:"klab_exit"`
	RunID       string      `json:"run_id"`
	RunDir      string      `json:"run_dir"`
	Kernel      string      `json:"kernel"`
	Version     string      `json:"version"`
	KernelID    string      `json:"kernel_id"`
	Accel       string      `json:"accel"`
	BootToAgent float64     `json:"boot_to_agent_s"`
	Wall        float64     `json:"wall_s"`
	Splats      []bootSplat `json:"splats"`
}

type bootSplat struct {
	Type  string `json:"type"`
	Title string `json:"title"`
}

func bootJSON(res *lab.BootResult, err error) bootSummary {
	m := res.Manifest
	s := bootSummary{
		ExitCode: res.ExitCode, RunDir: res.RunDir, RunID: filepath.Base(res.RunDir),
		BootToAgent: res.BootToAgent.Seconds(), Wall: res.Wall.Seconds(), Splats: []bootSplat{},
	}
	if m != nil {
		s.Outcome, s.Class, s.Message = string(m.Outcome.Status), string(m.Outcome.Class), shown(m.Outcome.Message)
		s.Kernel, s.Version, s.KernelID, s.Accel = shown(m.Kernel.Name), shown(m.Kernel.Version), m.Kernel.ID, string(m.Accel)
	}
	s.KlabExit = res.ExitCode
	if err != nil {
		s.KlabExit = lab.ExitCode(err)
	}
	for _, r := range res.Splats {
		s.Splats = append(s.Splats, bootSplat{Type: string(r.Type), Title: shown(r.Title)})
	}
	return s
}

func summary(w io.Writer, res *lab.BootResult) {
	m := res.Manifest
	fmt.Fprintf(w, "klab: %s %s under %s: boot-to-agent %.2fs, wall %.2fs, exit %d, %d splat(s); run saved to %s\n",
		shown(m.Kernel.Name), shown(m.Kernel.Version), m.Accel, res.BootToAgent.Seconds(), res.Wall.Seconds(), res.ExitCode, len(res.Splats), res.RunDir)
	for _, s := range res.Splats {
		fmt.Fprintf(w, "klab:   splat: %s\n", shown(s.Title))
	}
}
