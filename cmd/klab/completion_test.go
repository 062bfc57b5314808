package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"klab/images/kerneldir"
)

// complete runs cobra's hidden __complete command, as the shell scripts
// of klab completion do, and returns the values offered (without their
// descriptions) and the directive.
func complete(t *testing.T, cache string, args ...string) ([]string, cobra.ShellCompDirective) {
	t.Helper()
	g := &globalOptions{}
	root := newRootCommandWith(g)
	var out, errb strings.Builder
	root.SetOut(&out)
	root.SetErr(&errb)
	args = append([]string{cobra.ShellCompRequestCmd, "--cache-dir", cache, "--runs-dir", cache}, args...)
	if code := runRoot(root, g, args, &errb); code != 0 {
		t.Fatalf("klab %q: status %d, %s", args, code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var d int
	if _, err := fmt.Sscanf(lines[len(lines)-1], ":%d", &d); err != nil {
		t.Fatalf("klab %q: no directive in %q", args, out.String())
	}
	var values []string
	for _, l := range lines[:len(lines)-1] {
		v, _, _ := strings.Cut(l, "\t")
		values = append(values, v)
	}
	return values, cobra.ShellCompDirective(d)
}

// fakeCache writes a cached Debian kernel and a kernel built as
// build:fix into a new cache directory, laid out as images keeps them.
func fakeCache(t *testing.T) string {
	t.Helper()
	cache := t.TempDir()
	write := func(dir string, k map[string]any) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "vmlinuz"), bytes.Repeat([]byte{1}, 4096), 0o644)
		// The ID hashes the image: a kernel that does not is damaged.
		id, err := kerneldir.ID(filepath.Join(dir, "vmlinuz"), "")
		if err != nil {
			t.Fatal(err)
		}
		k["id"] = id
		kj, _ := json.Marshal(k)
		os.WriteFile(filepath.Join(dir, "kernel.json"), kj, 0o644)
	}
	write(filepath.Join(cache, "kernels", "debian", "linux-image-7.3.4+deb13-cloud-amd64_7.3.4-1"), map[string]any{
		"name": "debian:7.3.4+deb13-cloud-amd64", "version": "7.3.4+deb13-cloud-amd64", "source": "debian",
	})
	b := filepath.Join(cache, "kernels", "build")
	write(filepath.Join(b, "results", "key0"), map[string]any{
		"name": "build:key0", "version": "7.3.4", "source": "build",
		"build": map[string]any{"tree": "fake", "base_config": "tinyconfig", "key": "key0"},
	})
	os.MkdirAll(filepath.Join(b, "names"), 0o755)
	if err := os.Symlink(filepath.Join("..", "results", "key0"), filepath.Join(b, "names", "fix")); err != nil {
		t.Fatal(err)
	}
	return cache
}

func TestCompletion(t *testing.T) {
	cache := fakeCache(t)
	tree := t.TempDir()
	for _, d := range []string{"linux", "linux-next", "lib"} {
		os.Mkdir(filepath.Join(tree, d), 0o755)
	}
	os.WriteFile(filepath.Join(tree, "linux.tar"), nil, 0o644)
	kernels := []string{"debian:6.1", "debian:6.12", "debian:7.2", "debian:7.3", "debian:7.3.4+deb13-cloud-amd64", "build:fix"}
	for _, tc := range []struct {
		args []string
		want []string
		dir  cobra.ShellCompDirective
	}{
		{[]string{"boot", "--kernel", ""}, kernels, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"boot", "-k", "debian:7"}, []string{"debian:7.2", "debian:7.3", "debian:7.3.4+deb13-cloud-amd64"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"shell", "--kernel", "bu"}, []string{"build:fix"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"run", "x.yaml", "--kernel", "debian:6.1"}, []string{"debian:6.1", "debian:6.12"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"initramfs", "--kernel", "./arch/"}, nil, cobra.ShellCompDirectiveDefault}, // a bzImage file
		{[]string{"boot", "--kernel", "bzIm"}, nil, cobra.ShellCompDirectiveDefault},
		{[]string{"kernels", "show", ""}, kernels, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"kernels", "rm", ""}, []string{"build:fix"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"kernels", "fetch", "debian:6"}, []string{"debian:6.1", "debian:6.12"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"boot", "--accel", ""}, []string{"auto", "kvm", "tcg"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"matrix", "run", "m.yaml", "--accel", "k"}, []string{"kvm"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"kernels", "fetch", "--flavour", ""}, debianFlavours(), cobra.ShellCompDirectiveNoFileComp},
		{[]string{"report", "last", "--format", ""}, []string{"text", "md", "json", "junit", "html"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"kernels", "build", "--config", "lab,d"}, []string{"lab,debug"}, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace},
		{[]string{"kernels", "build", "--config", "./frag"}, nil, cobra.ShellCompDirectiveDefault},
		{[]string{"boot", "--kernel", ".", "--build", "--config", "lab,"}, []string{"lab,lab", "lab,debug", "lab,tree"}, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace},
		{[]string{"kernels", "build", "--source", "debian:7.3"}, []string{"debian:7.3"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"kernels", "build", "--base-config", "t"}, []string{"tinyconfig"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"matrix", "emit", "m.yaml", "--engine", ""}, []string{"github", "gitlab"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"fuse", "serve", "--transport", ""}, []string{"dev", "uring"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"runs", "show", ""}, []string{"last"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"run", "fuse-t"}, []string{"fuse-timeout", "fuse-transport"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"kernels", "l"}, []string{"list"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"boot", "--kernel", "tree:" + tree + "/lin"}, []string{"tree:" + tree + "/linux/", "tree:" + tree + "/linux-next/"}, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace},
	} {
		got, dir := complete(t, cache, tc.args...)
		if strings.Join(got, " ") != strings.Join(tc.want, " ") || dir != tc.dir {
			t.Errorf("complete %q = %q, directive %d; want %q, %d", tc.args, got, dir, tc.want, tc.dir)
		}
	}
	// klab completion SHELL writes the script that calls __complete.
	root := newRootCommand()
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		if c, _, err := root.Find([]string{"completion", sh}); err != nil || c.Name() != sh {
			t.Errorf("no klab completion %s: %v", sh, err)
		}
	}
	var script strings.Builder
	if err := root.GenBashCompletionV2(&script, true); err != nil || !strings.Contains(script.String(), "__complete") {
		t.Errorf("bash completion: %v", err)
	}
}

// TestArgCompletionsNameCommands: the commands argCompletions completes
// exist, so a renamed command does not lose its completion silently.
func TestArgCompletionsNameCommands(t *testing.T) {
	paths := map[string]bool{}
	for _, c := range allCommands(newRootCommand()) {
		paths[c.CommandPath()] = true
	}
	for p := range argCompletions(&globalOptions{}) {
		if !paths[p] {
			t.Errorf("argCompletions names %q, which is no command", p)
		}
	}
}
