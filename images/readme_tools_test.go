package images

import (
	"os"
	"path"
	"slices"
	"strings"
	"testing"
)

// TestREADMEListsGuestTools: the README's list of what a guest has is
// BaseCommands, command for command (init and gosh aside).
func TestREADMEListsGuestTools(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(b)), " ")
	const lead = "with these commands and no others: "
	i := strings.Index(text, lead)
	if i < 0 {
		t.Fatal("README.md has no list of the guest's commands")
	}
	list, _, _ := strings.Cut(text[i+len(lead):], ", plus")
	var listed []string
	for _, w := range strings.Split(strings.ReplaceAll(list, " and ", ", "), ",") {
		if w = strings.TrimSpace(w); w != "" {
			listed = append(listed, w)
		}
	}
	var want []string
	for _, p := range BaseCommands {
		if n := path.Base(p); n != "init" && n != "gosh" {
			want = append(want, n)
		}
	}
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("README lists %v\nBaseCommands has %v", listed, want)
	}
}
