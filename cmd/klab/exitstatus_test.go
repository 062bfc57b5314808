package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"klab/lab"
)

// badInputCases are, for every command klab runs, three command lines it
// must refuse before doing any work, with status 2 and a message: a flag
// it does not know (--bogus, the same for every command, so not listed),
// a missing argument (the command alone when it needs one; an extra
// argument, or a misspelt one, for the commands that need none) and a bad
// value (of an argument, or of a flag). dir is a directory holding
// bad.yaml, an experiment file with a problem, and notdir, a file.
func badInputCases(dir string) map[string]struct{ missing, bad []string } {
	bad := filepath.Join(dir, "bad.yaml")
	notDir := filepath.Join(dir, "notdir")
	return map[string]struct{ missing, bad []string }{
		"bisect":                {nil, []string{"--tree", dir, "--good", "HEAD~1", "--bad", "HEAD", "fuse-transport"}},
		"boot":                  {[]string{"--", "true"}, []string{"--kernel", "fedora:40", "--", "true"}},
		"cache gc":              {[]string{"extra"}, []string{"--max-size", "abc"}},
		"cache list":            {[]string{"extra"}, []string{"--json=maybe"}},
		"compare":               {nil, []string{"nosuch-a", "nosuch-b"}},
		"completion bash":       {[]string{"extra"}, []string{"--no-descriptions=maybe"}},
		"completion fish":       {[]string{"extra"}, []string{"--no-descriptions=maybe"}},
		"completion powershell": {[]string{"extra"}, []string{"--no-descriptions=maybe"}},
		"completion zsh":        {[]string{"extra"}, []string{"--no-descriptions=maybe"}},
		"doctor":                {[]string{"extra"}, []string{"--probe=maybe"}},
		"experiments list":      {[]string{"extra"}, []string{"--json=maybe"}},
		"experiments show":      {nil, []string{"nosuch"}},
		"experiments validate":  {nil, []string{bad}},
		"fstests":               {[]string{"generic/001"}, []string{"--kernel", "debian:7.3", "--config", "nope", "generic/001"}},
		"fstests build":         {nil, []string{"--src", filepath.Join(dir, "nosuch")}},
		"fuse check interrupt":  {[]string{"extra"}, []string{"--policy", "nope"}},
		"fuse check kill":       {[]string{"extra"}, []string{"--transport", "nope"}},
		"fuse check timeout":    {[]string{"extra"}, []string{"--transport", "nope"}},
		"fuse serve":            {[]string{"--backing", dir}, []string{"--server", "nope", "--backing", dir, filepath.Join(dir, "m")}},
		"help":                  {[]string{"kernels", "lsit"}, []string{"nosuch"}},
		"initramfs":             {nil, []string{"--kernel", "fedora:40"}},
		"initramfs parts":       {nil, []string{"--out", notDir}},
		"kernels build":         {nil, []string{"--source", "fedora:40"}},
		"kernels fetch":         {nil, []string{"fedora:40"}},
		"kernels gc":            {[]string{"extra"}, []string{"--max-size", "abc"}},
		"kernels list":          {[]string{"extra"}, []string{"--json=maybe"}},
		"kernels rm":            {nil, []string{"debian:7.3"}},
		"kernels show":          {nil, []string{"fedora:40"}},
		"matrix cache-key":      {nil, []string{filepath.Join(dir, "nosuch.yaml")}},
		"matrix emit":           {nil, []string{bad, "--engine", "nope"}},
		"matrix plan":           {nil, []string{filepath.Join(dir, "nosuch.yaml")}},
		"matrix report":         {nil, []string{filepath.Join(dir, "nosuch")}},
		"matrix run":            {nil, []string{filepath.Join(dir, "nosuch.yaml")}},
		"report":                {nil, []string{"nosuch"}},
		"rerun":                 {nil, []string{"nosuch"}},
		"results merge":         {nil, []string{filepath.Join(dir, "nosuch"), "--out", filepath.Join(dir, "out")}},
		"results pack":          {nil, []string{dir}},
		"results unpack":        {nil, []string{notDir}},
		"run":                   {[]string{"fuse-transport"}, []string{"nosuch", "--kernel", "debian:7.3"}},
		"runs gc":               {nil, []string{"--keep", "-1"}},
		"runs list":             {[]string{"extra"}, []string{"--json=maybe"}},
		"runs pack":             {nil, []string{"nosuch"}},
		"runs rm":               {nil, []string{"nosuch"}},
		"runs show":             {nil, []string{"nosuch"}},
		"runs unpack":           {nil, []string{notDir}},
		"shell":                 {nil, []string{"--kernel", "fedora:40"}},
		"splats parse":          {nil, []string{filepath.Join(dir, "nosuch.log")}},
		"userspace build":       {[]string{"extra"}, []string{"--suite", "nope"}},
		"version":               {[]string{"extra"}, []string{"extra", "words"}},
	}
}

// TestBadInputExitsTwo: every command refuses an unknown flag, a missing
// argument and a bad value with status 2 (klab boot too: its other
// statuses are the guest command's) and says why on stderr, as README's
// table of exit statuses promises.
func TestBadInputExitsTwo(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("name: bad name\nworkloads: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notdir"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := badInputCases(dir)
	seen := map[string]bool{}
	for _, c := range allCommands(newRootCommand()) {
		path := strings.TrimPrefix(c.CommandPath(), "klab")
		path = strings.TrimSpace(path)
		if path == "" || c.Annotations[groupAnnotation] != "" || !c.Runnable() {
			continue
		}
		seen[path] = true
		tc, ok := cases[path]
		if !ok {
			t.Errorf("klab %s: no bad-input cases; add them to badInputCases", path)
			continue
		}
		words := strings.Fields(path)
		lines := [][]string{append(slices.Clone(words), "--bogus")}
		if tc.missing != nil {
			lines = append(lines, append(slices.Clone(words), tc.missing...))
		} else {
			lines = append(lines, words) // the argument or flag it needs, left out
		}
		lines = append(lines, append(slices.Clone(words), tc.bad...))
		for _, args := range lines {
			code, stdout, stderr := runCLI(t, args...)
			if code != exitBadInput || !strings.HasPrefix(stderr, "klab: ") {
				t.Errorf("klab %s: status %d, stdout %q, stderr %q; want status 2 and why", strings.Join(args, " "), code, cut(stdout), cut(stderr))
			}
		}
	}
	for path, tc := range cases {
		if tc.bad != nil && !seen[path] {
			t.Errorf("badInputCases has klab %s, which is no command", path)
		}
	}
}

// cut is s, at most 300 bytes of it, for a test's message.
func cut(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// TestBootExitsWithTheCommandsStatus: once the guest ran the command,
// klab boot exits with the command's own status, whatever it is: a 2
// (grep's error, a usage error) is not klab's bad input, nor 125.
func TestBootExitsWithTheCommandsStatus(t *testing.T) {
	for status := 0; status <= 255; status++ {
		g := &globalOptions{}
		root := newRootCommandWith(g)
		for _, c := range root.Commands() {
			if c.Name() == "boot" {
				root.RemoveCommand(c)
			}
		}
		root.AddCommand(newBootCommand(g, func(_ context.Context, o *bootOptions) error {
			return bootExit(&lab.BootResult{ExitCode: status})
		}))
		var stderr strings.Builder
		root.SetErr(&stderr)
		code := runRoot(root, g, []string{"--cache-dir", t.TempDir(), "--runs-dir", t.TempDir(),
			"boot", "--kernel", "debian:7.3", "--", "sh", "-c", "exit " + strconv.Itoa(status)}, &stderr)
		if code != status || stderr.Len() != 0 {
			t.Errorf("a guest command that exits %d: klab boot exits %d, stderr %q", status, code, stderr.String())
		}
	}
}
