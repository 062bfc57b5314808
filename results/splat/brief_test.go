package splat

import (
	"strings"
	"testing"
)

// TestBrief: a WARNING keeps its message, the RIP line and the certain
// frames, and loses the register dump, Code: and the "? " frames.
func TestBrief(t *testing.T) {
	in := strings.Join([]string{
		"------------[ cut here ]------------",
		"klab-e2e: bisect target",
		"WARNING: fs/fuse/req.c:66 at __fuse_simple_request+0x36/0x70, CPU#1: klab-agent/69",
		"RIP: 0010:__fuse_simple_request+0x36/0x70",
		"Code: 26 f6 42 1b 01 75 0b 41 f6 84 24 84 00 00 00 01",
		"RSP: 0018:ff110000003ffa88 EFLAGS: 00000246",
		"RAX: 0000000000000000 RBX: 0000000000000000 RCX: ffffffff818aeca0",
		"R13: ff1100000054fce0 R14: ff110000003ffbb8 R15: ff11000000bdd040",
		"FS:  000000000088f168(0000) GS:ff110000bc716000(0000) knlGS:0000000000000000",
		"CS:  0010 DS: 0000 ES: 0000 CR0: 0000000080050033",
		"CR2: 00000000005882c0 CR3: 00000000029c6000 CR4: 00000000003516b0",
		"Call Trace:",
		" <TASK>",
		" fuse_lookup_name+0x124/0x250",
		" ? vma_wants_writenotify+0xa/0x70",
		" fuse_lookup+0x7f/0x190",
		" </TASK>",
	}, "\n")
	want := strings.Join([]string{
		"------------[ cut here ]------------",
		"klab-e2e: bisect target",
		"WARNING: fs/fuse/req.c:66 at __fuse_simple_request+0x36/0x70, CPU#1: klab-agent/69",
		"RIP: 0010:__fuse_simple_request+0x36/0x70",
		"Call Trace:",
		" <TASK>",
		" fuse_lookup_name+0x124/0x250",
		" fuse_lookup+0x7f/0x190",
		" </TASK>",
	}, "\n")
	if got := Brief(in); got != want {
		t.Errorf("Brief:\n%s\nwant\n%s", got, want)
	}
}
