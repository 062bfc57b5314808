package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"klab/results"
)

// writeBootRun saves a boot run of command in runs, ended with status
// and exit code.
func writeBootRun(t *testing.T, runs, id string, command []string, status results.Status, exit int) {
	t.Helper()
	r, err := results.Store{Root: runs}.CreateNamed(id)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	m := &results.Manifest{RunID: id, Command: command, Kernel: results.Kernel{Name: "debian:7.3", Version: "7.3.0-1-cloud-amd64"},
		Accel: results.AccelTCG, Times: results.Times{Start: start, End: start.Add(time.Minute)}, Outcome: results.NewOutcome(status, "", exit)}
	if err := r.WriteManifest(m); err != nil {
		t.Fatal(err)
	}
}

// TestRunsListShowsTheCommandsStatus: a boot whose command exited 3 is
// listed as "exit 3", not "ok" (klab boot exited 3); one that exited 0 as
// ok, and a failed run by its status. --json gives exit_code.
func TestRunsListShowsTheCommandsStatus(t *testing.T) {
	runs := t.TempDir()
	writeBootRun(t, runs, "20260301-100000-boot-aaaaaa", []string{"klab", "boot", "--", "sh", "-c", "exit 3"}, results.StatusOK, 3)
	writeBootRun(t, runs, "20260301-100100-shell-bbbbbb", []string{"klab", "shell"}, results.StatusOK, 0)
	writeBootRun(t, runs, "20260301-100200-boot-cccccc", []string{"klab", "boot", "--", "true"}, results.StatusKernelPanic, 0)
	code, stdout, stderr := runCLI(t, "--runs-dir", runs, "runs", "list")
	if code != 0 {
		t.Fatalf("runs list: status %d, %q", code, stderr)
	}
	want := []string{
		"RUN                           KIND  STATUS        EXPERIMENT  KERNELS",
		"20260301-100000-boot-aaaaaa   boot  exit 3        -           debian:7.3",
		"20260301-100100-shell-bbbbbb  boot  ok            -           debian:7.3",
		"20260301-100200-boot-cccccc   boot  kernel-panic  -           debian:7.3",
	}
	if got := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("runs list:\n%s\nwant:\n%s", stdout, strings.Join(want, "\n"))
	}
	code, stdout, _ = runCLI(t, "--runs-dir", runs, "runs", "list", "--json")
	var list []runEntry
	if err := json.Unmarshal([]byte(stdout), &list); code != 0 || err != nil || len(list) != 3 {
		t.Fatalf("runs list --json: status %d, %v: %s", code, err, stdout)
	}
	if e := list[0]; e.Status != "ok" || e.ExitCode == nil || *e.ExitCode != 3 {
		t.Errorf("runs list --json: first run %+v, want status ok and exit_code 3", e)
	}
}

// TestRunsShowQuotesTheCommand: klab runs show prints a boot run's command
// line so that a shell reads back the same words: spaces, quotes, $, an
// empty word, globs and newlines included.
func TestRunsShowQuotesTheCommand(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to read the command line back")
	}
	runs := t.TempDir()
	command := []string{"bin/klab", "boot", "--kernel", "debian:7.3", "--run-id=a b", "--", "sh", "-c", `echo "it's $HOME" \ ; exit 3`,
		"", "it's", `"double"`, "$HOME", "${x:-y}", "`id`", "*", "~", "a=b", "#x", "tab\there", "new\nline", `back\slash`, "!", "é ü", "--x='1'"}
	writeBootRun(t, runs, "20260301-100000-boot-aaaaaa", command, results.StatusOK, 3)
	code, stdout, stderr := runCLI(t, "--runs-dir", runs, "runs", "show", "last")
	_, line, ok := strings.Cut(stdout, "\ncommand: ")
	line, _, ok2 := strings.Cut(line, "\n0 kernel splat(s)\n")
	if code != 0 || !ok || !ok2 {
		t.Fatalf("runs show: status %d, stderr %q:\n%s", code, stderr, stdout)
	}
	if want := "bin/klab boot --kernel debian:7.3 '--run-id=a b' -- sh -c "; !strings.HasPrefix(line, want) {
		t.Errorf("runs show: command: %s\nwant it to start with %s", line, want)
	}
	out, err := exec.Command(sh, "-c", `printf '%s\0' `+line).Output()
	if err != nil {
		t.Fatalf("sh -c printf %s: %v", line, err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !slices.Equal(got, command) {
		t.Errorf("the shell read back\n%q\nfrom %s\nwant\n%q", got, line, command)
	}
	// A first word with '=' would be an assignment: it is quoted.
	if got := shellJoin([]string{"A=b", "c=d", ""}); got != "'A=b' c=d ''" {
		t.Errorf("shellJoin = %s", got)
	}
	// Control characters never reach the terminal.
	writeBootRun(t, runs, "20260301-100100-boot-bbbbbb", []string{"klab", "boot", "--", "echo", "\x1b[2Jx"}, results.StatusOK, 0)
	if _, stdout, _ := runCLI(t, "--runs-dir", runs, "runs", "show", "last"); !strings.Contains(stdout, "\ncommand: klab boot -- echo '[2Jx'\n") || bytes.ContainsRune([]byte(stdout), 0x1b) {
		t.Errorf("runs show printed %q", stdout)
	}
}
