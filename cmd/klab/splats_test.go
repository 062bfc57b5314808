package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// warningLog is a console log with one WARNING.
const warningLog = `[   19.880000] fuse: init (API version 7.44)
[   20.100000] ------------[ cut here ]------------
[   20.100100] WARNING: fs/fuse/dev.c:2226 at fuse_dev_do_write+0x9b4/0xd10, CPU#0: fuse-server/421
[   20.100200] Modules linked in: brd
[   20.100300] CPU: 0 UID: 0 PID: 421 Comm: fuse-server Not tainted 7.3.0-klab #1 PREEMPT(voluntary)
[   20.100500] RIP: 0010:fuse_dev_do_write+0x9b4/0xd10
[   20.101500] Call Trace:
[   20.101600]  <TASK>
[   20.101700]  fuse_dev_write+0x5e/0x90
[   20.101800]  vfs_write+0x2a4/0x460
[   20.101900]  ksys_write+0x6d/0xf0
[   20.102000]  do_syscall_64+0x82/0x190
[   20.102100]  entry_SYSCALL_64_after_hwframe+0x76/0x7e
[   20.102200]  </TASK>
[   20.102300] ---[ end trace 0000000000000000 ]---
[   21.000000] random: crng init done
`

// TestSplatsParseFail: --fail exits 1 when a splat fails the default
// policy (the one klab boot applies), 0 otherwise.
func TestSplatsParseFail(t *testing.T) {
	dir := t.TempDir()
	warn := filepath.Join(dir, "warn.log")
	clean := filepath.Join(dir, "clean.log")
	os.WriteFile(warn, []byte(warningLog), 0o644)
	os.WriteFile(clean, []byte("[    0.000000] Linux version 7.3.0\n[    1.000000] random: crng init done\n"), 0o644)
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{warn}, 0, "WARNING in fuse_dev_do_write\n", ""},
		{[]string{"--fail", warn}, 1, "WARNING in fuse_dev_do_write\n", "klab: 1 splat(s) fail the default policy: WARNING in fuse_dev_do_write\n"},
		{[]string{"--fail", clean, warn}, 1, warn + ": WARNING in fuse_dev_do_write\n", "fail the default policy"},
		{[]string{"--fail", "--json", warn}, 1, `"title": "WARNING in fuse_dev_do_write"`, "fail the default policy"},
		{[]string{"--fail", clean}, 0, "", ""},
		{[]string{"--fail", "--allow-warning", "in fuse_dev_", warn}, 0, "WARNING in fuse_dev_do_write\n", ""},
		{[]string{"--fail", "--allow-warning", "/^WARNING in fuse_dev_do_write$/", warn}, 0, "WARNING in fuse_dev_do_write\n", ""},
		{[]string{"--fail", "--allow-warning", "/(/", warn}, exitBadInput, "", "not a valid regexp"},
		{[]string{"--allow-warning", "x", warn}, exitBadInput, "", "only applies with --fail"},
	} {
		code, stdout, stderr := runCLI(t, append([]string{"splats", "parse"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) || (tc.stdout == "" && stdout != "") {
			t.Errorf("splats parse %q: status %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
}
