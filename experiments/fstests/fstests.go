// Package fstests holds the fstests files klab ships: the expunge files
// (expunge/*.txt, one per configuration family and all.txt for every
// configuration), built into the binary so that klab finds them from
// any directory. results/suite reads them (suite.LoadExpunges).
package fstests

import (
	"embed"
	"io/fs"
)

// expunges are the expunge files.
//
//go:embed expunge/*.txt
var expunges embed.FS

// ExpungeDir is where the expunge files are in klab's source tree, for
// messages.
const ExpungeDir = "experiments/fstests/expunge"

// Expunges returns the shipped expunge files, all.txt, ext4.txt,
// fuse.txt, ..., at the root of a read-only file system.
func Expunges() fs.FS {
	sub, err := fs.Sub(expunges, "expunge")
	if err != nil {
		panic(err) // "expunge" is a valid path: fs.Sub cannot fail
	}
	return sub
}
