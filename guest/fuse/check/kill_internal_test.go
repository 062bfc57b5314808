package check

import "testing"

// TestOwnMountWait: the stack of a dying server thread flushing a file on
// its own mount (seen in a debian:7.3 guest before the poll hack moved to a
// child process) is recognised; blocked clients and a plain zombie are not.
func TestOwnMountWait(t *testing.T) {
	dying := `thread 254 (Z (zombie)):

thread 257 (D (disk sleep)):
  [<0>] request_wait_answer+0x1c7/0x270
  [<0>] fuse_chan_send+0x120/0x270
  [<0>] fuse_flush+0x168/0x1a0
  [<0>] filp_flush+0x3a/0x80
  [<0>] filp_close+0x13/0x30
  [<0>] put_files_struct.part.0+0x5a/0xc0
  [<0>] do_exit+0x2b4/0xa80
  [<0>] do_group_exit+0x30/0x80
`
	client := `thread 250 (S (sleeping)):
  [<0>] request_wait_answer+0x15c/0x270
  [<0>] fuse_chan_send+0x120/0x270
  [<0>] fuse_lookup_name+0xc0/0x210
thread 251 (D (disk sleep)):
  [<0>] do_exit+0x2b4/0xa80
`
	if !ownMountWait(dying) || ownMountWait(client) || ownMountWait("") {
		t.Error("ownMountWait misjudged a stack")
	}
}
