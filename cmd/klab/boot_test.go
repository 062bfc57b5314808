package main

import (
	"testing"

	"klab/images"
)

func TestInWorkDir(t *testing.T) {
	for _, c := range []struct {
		dests []string
		want  bool
	}{
		{nil, false},
		{[]string{"/opt/t.sh"}, false},
		{[]string{"/opt/t.sh", "/work/t"}, true},
		{[]string{"work/t"}, true},
		{[]string{"/workdir/t"}, false},
		{[]string{"/work"}, false},
	} {
		var files []images.ExtraFile
		for _, d := range c.dests {
			files = append(files, images.ExtraFile{Source: "/x", Dest: d})
		}
		if got := inWorkDir(files); got != c.want {
			t.Errorf("inWorkDir(%v) = %v, want %v", c.dests, got, c.want)
		}
	}
}
