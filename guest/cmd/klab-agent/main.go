// Command klab-agent is the klab guest agent. The kernel starts it as /init
// inside a klab VM (u-root's init would run it as /bin/uinit, and still can:
// rdinit=/bbin/init). It reads klab.mode= from the kernel command
// line, prepares the guest, and then either serves the host's steps over the
// agent channel (klab.mode=run) or gives the user a shell on the console
// (klab.mode=shell). Whatever happens it ends by powering the VM down: it
// never returns to u-root's init, which would start an interactive shell.
//
// Outside a klab guest (no klab.mode= in /proc/cmdline) it refuses to run
// and exits 2, so that running it on the host by mistake reboots nothing.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"klab/guest/agent"
	"klab/guest/fuse/cli"
	"klab/guest/proto"
)

func main() {
	if filepath.Base(os.Args[0]) == "modprobe" { // the kernel's module helper, or a user's modprobe
		os.Exit(agent.ModprobeMain(agent.ModulesDir, os.Args[1:], os.Stderr))
	}
	if strings.HasPrefix(filepath.Base(os.Args[0]), "mount.fuse.") { // mount(8)'s helper for an fstests FUSE mount
		os.Exit(agent.FUSEMountHelperMain(os.Args, os.Stderr))
	}
	if len(os.Args) == 2 && os.Args[1] == agent.FUSEDaemonArg { // the server of one fstests FUSE mount
		os.Exit(agent.FUSEDaemonMain(os.Stdin, os.Stdout))
	}
	if len(os.Args) == 2 && os.Args[1] == agent.WorkloadChildArg { // one workload step, for the agent
		os.Exit(agent.WorkloadChildMain(os.Stdin, os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == "fuse" { // a guest CLI: klab-agent fuse serve|check ...
		os.Exit(cli.Main("klab-agent", os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) == 2 && (os.Args[1] == "-version" || os.Args[1] == "--version") {
		fmt.Println(agent.Version)
		return
	}
	t0 := agent.BootNanos() // 0 before /proc is up: the clock needs no mount
	var initErr error
	cmdline, err := os.ReadFile("/proc/cmdline")
	if os.Getpid() == 1 {
		// The kernel's init (/init in klab's initramfs): set the guest up
		// as an init does, before anything else.
		_ = agent.MountAll(agent.DefaultMounts()[:1])
		if cmdline, err = os.ReadFile("/proc/cmdline"); err == nil {
			initErr = agent.InitSystem(string(cmdline))
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "klab-agent: cannot read /proc/cmdline (%v); refusing to run outside a klab guest\n", err)
		os.Exit(2)
	}
	mode, found, err := agent.ParseMode(string(cmdline))
	if !found {
		fmt.Fprintf(os.Stderr, "klab-agent: /proc/cmdline has no %s=: this is not a klab guest; refusing to run (the agent powers its machine off)\n", agent.ModeParam)
		os.Exit(2)
	}

	// From here on we are the guest's uinit: never return to init.
	defer func() {
		if r := recover(); r != nil {
			fatal(fmt.Errorf("panic: %v", r))
		}
	}()
	// Keep console signals (Ctrl-C in the shell, a hangup) from killing
	// the agent; caught signals are reset to default in child processes.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGTSTP, syscall.SIGTERM)
	go func() {
		for range sigs {
		}
	}()

	if err != nil {
		fatal(err)
	}
	mods, setupErr := agent.Setup()
	t1 := agent.BootNanos()
	setupErr = errors.Join(initErr, setupErr)
	if setupErr != nil {
		fmt.Printf("klab-agent: setup: %v\n", setupErr)
	}
	for _, m := range mods {
		if m.Error != "" {
			fmt.Printf("klab-agent: module %s: %s\n", m.Name, m.Error)
		}
	}

	switch mode {
	case agent.ModeShell:
		status, err := shell(string(cmdline))
		if err != nil {
			fatal(err)
		}
		// klab shell reads the status from the console log.
		fmt.Printf("\n%s%d\n", proto.ShellExitPrefix, status)
		powerOff()
	default:
		if err := run(mods, setupErr, t0, t1); err != nil {
			fatal(err)
		}
		powerOff()
	}
}

// run opens the channel, says hello and serves the host until it shuts the
// VM down (nil) or the channel breaks (an error).
func run(mods []proto.ModuleLoad, setupErr error, start, setupDone int64) error {
	ctx := context.Background()
	path := agent.WaitChannel(ctx, "/sys", "/dev", agent.DefaultChannelWait)
	channelDone := agent.BootNanos()
	ch, err := agent.OpenChannel(path)
	if err != nil {
		return err
	}
	defer ch.Close()
	fmt.Printf("klab-agent: %s ready on %s\n", agent.Version, path)

	a := &agent.Agent{In: ch, Out: ch, Handlers: agent.DefaultHandlers()}
	hello := agent.NewHello(path, mods)
	hello.StartNanos, hello.SetupNanos, hello.ChannelNanos = start, setupDone-start, channelDone-setupDone
	if err := a.SendHello(hello); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	if setupErr != nil {
		a.Logf("setup: %v", setupErr)
	}
	if err := a.Serve(ctx); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Println("klab-agent: shutdown requested, powering off")
	return nil
}

// shell runs the console's shell: u-root's, or with proto.UserspaceParam
// on the command line, the userspace's, once it is mounted.
func shell(cmdline string) (int, error) {
	v, ok := agent.CmdlineParam(cmdline, proto.UserspaceParam)
	if !ok {
		return agent.RunShell(os.Stdin, os.Stdout, os.Stderr)
	}
	u, err := proto.ParseUserspaceParam(v)
	if err != nil {
		return 0, err
	}
	logf := func(format string, args ...any) { fmt.Printf("klab-agent: "+format+"\n", args...) }
	if err := agent.MountUserspace(u, logf); err != nil {
		return 0, err
	}
	status, err := agent.RunShellIn(u.Root, os.Stdin, os.Stdout, os.Stderr)
	// The shell had the console as its controlling terminal: its exit
	// hung up the console files open until then, so the status line goes
	// through a new one.
	if f, oerr := os.OpenFile("/dev/console", os.O_WRONLY, 0); oerr == nil {
		os.Stdout = f
	}
	return status, err
}

// fatal reports err on the console and powers down after a second.
func fatal(err error) {
	fmt.Printf("klab-agent: fatal: %v\n", err)
	time.Sleep(time.Second)
	powerOff()
}

// powerOff ends the VM. If reboot(2) fails it waits forever rather than
// returning to init.
func powerOff() {
	err := agent.PowerOff()
	fmt.Printf("klab-agent: power off failed: %v; halting here\n", err)
	for {
		time.Sleep(time.Hour)
	}
}
