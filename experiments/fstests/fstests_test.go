package fstests

import (
	"io/fs"
	"testing"

	"klab/results/suite"
)

// TestShippedExpunges checks that every shipped expunge file parses, and
// that the FUSE family leaves out the file-handle tests.
func TestShippedExpunges(t *testing.T) {
	names, _ := fs.Glob(Expunges(), "*.txt")
	if len(names) < 3 {
		t.Fatalf("shipped expunge files: %v", names)
	}
	if err := suite.CheckExpunges(Expunges()); err != nil {
		t.Fatal(err)
	}
	ex, err := suite.LoadExpunges(Expunges(), "fuse-klab-uring", "6.12.43+deb13-amd64")
	if err != nil {
		t.Fatal(err)
	}
	run, out := suite.ApplyExpunges([]string{"generic/013", "generic/426", "generic/467", "generic/477", "generic/650"}, ex)
	if len(run) != 1 || run[0] != "generic/013" || len(out) != 4 {
		t.Errorf("fuse expunges: run %v, expunged %+v", run, out)
	}
	if ex, _ := suite.LoadExpunges(Expunges(), "ext4", "6.12"); len(ex) != 0 {
		t.Errorf("ext4 expunges: %+v", ex)
	}
}
