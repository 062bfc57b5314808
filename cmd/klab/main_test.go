package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"klab/guest/proto"
	"klab/images"
	"klab/images/apt"
	"klab/images/debian"
	"klab/lab"
)

// TestPanicBecomesError: a panic in a command reaches the user as one
// line naming it and status 125; the stack goes to a file, or to stderr
// with --verbose.
func TestPanicBecomesError(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		cache := t.TempDir()
		g := &globalOptions{}
		root := newRootCommandWith(g)
		root.AddCommand(&cobra.Command{Use: "boom", RunE: func(*cobra.Command, []string) error {
			var m map[string]int
			m["x"] = 1
			return nil
		}})
		args := []string{"boom", "--cache-dir", cache}
		if verbose {
			args = append(args, "--verbose")
		}
		var stderr strings.Builder
		code := runRoot(root, g, args, &stderr)
		out := stderr.String()
		if code != lab.ExitInfra || !strings.HasPrefix(out, "klab: internal error: assignment to entry in nil map\n") {
			t.Fatalf("verbose=%v: status %d, stderr %q", verbose, code, out)
		}
		crashes, _ := filepath.Glob(filepath.Join(cache, "crash-*.log"))
		if verbose {
			if !strings.Contains(out, "goroutine ") || len(crashes) != 0 {
				t.Errorf("--verbose: want the stack on stderr and no crash file: %q, %v", out, crashes)
			}
			continue
		}
		if len(crashes) != 1 || !strings.Contains(out, crashes[0]) || strings.Contains(out, "goroutine ") {
			t.Fatalf("want one crash file named on stderr and no stack there: %q, %v", out, crashes)
		}
		if data, _ := os.ReadFile(crashes[0]); !strings.Contains(string(data), "goroutine ") {
			t.Errorf("the crash file lacks the stack: %q", data)
		}
	}
}

// sharedDir returns a new directory that every user may write into, as
// /tmp.
func sharedDir(t *testing.T) string {
	t.Helper()
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	return shared
}

// TestSharedDirsRefused: a world-writable cache or runs directory is bad
// input before any command runs; listing experiments needs neither.
func TestSharedDirsRefused(t *testing.T) {
	shared := sharedDir(t)
	for _, args := range [][]string{
		{"kernels", "list", "--cache-dir", shared},
		{"runs", "list", "--runs-dir", shared},
		{"initramfs", "--kernel", "debian:7.3", "--cache-dir", shared},
	} {
		g := &globalOptions{}
		var stderr strings.Builder
		code := runRoot(newRootCommandWith(g), g, args, &stderr)
		if code != exitBadInput || !strings.Contains(stderr.String(), "is writable by every user") {
			t.Errorf("%v: status %d, stderr %q", args, code, stderr.String())
		}
	}
	for _, args := range [][]string{{"experiments", "list"}, {"experiments"}, {"kernels"}, {"version"}} {
		g := &globalOptions{}
		root := newRootCommandWith(g)
		var stdout, stderr strings.Builder
		root.SetOut(&stdout)
		if code := runRoot(root, g, append(args, "--cache-dir", shared), &stderr); code != 0 {
			t.Errorf("%v: status %d, %q", args, code, stderr.String())
		}
	}
}

// TestGlobalFlagsChecked: a malformed Debian mirror, from --debian-mirror
// or else $KLAB_DEBIAN_MIRROR, and an unsafe cache or runs directory are
// bad input before any command does any work (status 2, klab boot's
// too), all of them at once; help and version run anyway.
func TestGlobalFlagsChecked(t *testing.T) {
	shared := sharedDir(t)
	badMirror := "file:/x\vsid"
	for _, tc := range []struct {
		env  string // $KLAB_DEBIAN_MIRROR
		args []string
		code int
		want []string
	}{
		{args: []string{"kernels", "fetch", "debian:7.3", "--debian-mirror", badMirror}, code: exitBadInput,
			want: []string{`--debian-mirror "file:/x\vsid" is not a usable mirror URI: want scheme://host/path with scheme http, https, file`}},
		{args: []string{"--debian-mirror", "ftp://mirror.example/debian", "boot", "--kernel", "/nonexistent/bzImage", "--", "true"}, code: exitBadInput,
			want: []string{`--debian-mirror "ftp://mirror.example/debian" is not a usable mirror URI`}},
		{env: "http://m.example/debian stable", args: []string{"runs", "list"}, code: exitBadInput,
			want: []string{`KLAB_DEBIAN_MIRROR "http://m.example/debian stable" is not a usable mirror URI`}},
		{env: "http://m.example/debian stable", args: []string{"runs", "list", "--debian-mirror", "http://m.example/debian"}},
		{args: []string{"runs", "list", "--debian-mirror", "file:///srv/debian/"}},
		{args: []string{"boot", "--kernel", "/nonexistent/bzImage", "--cache-dir", shared, "--", "true"}, code: exitBadInput,
			want: []string{"cache directory " + shared + " is writable by every user"}},
		{args: []string{"kernels", "list", "--debian-mirror", badMirror, "--runs-dir", shared}, code: exitBadInput,
			want: []string{"--debian-mirror", "runs directory " + shared + " is writable by every user"}},
		{args: []string{"version", "--debian-mirror", badMirror, "--cache-dir", shared}},
		{args: []string{"help", "boot", "--debian-mirror", badMirror}},
	} {
		t.Setenv(apt.MirrorEnv, tc.env)
		g := &globalOptions{}
		root := newRootCommandWith(g)
		root.SetOut(&strings.Builder{})
		cache, runs := t.TempDir(), t.TempDir()
		var stderr strings.Builder
		code := runRoot(root, g, append([]string{"--cache-dir", cache, "--runs-dir", runs}, tc.args...), &stderr)
		if code != tc.code {
			t.Errorf("klab %q: status %d, want %d; stderr %q", tc.args, code, tc.code, stderr.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("klab %q: stderr %q, want %q in it", tc.args, stderr.String(), w)
			}
		}
		if tc.code != 0 {
			for _, d := range []string{cache, runs} {
				if ents, _ := os.ReadDir(d); len(ents) != 0 {
					t.Errorf("klab %q: refused, but %s holds %d entries", tc.args, d, len(ents))
				}
			}
		}
	}
}

// TestNoMirrorHint: when nothing names a Debian mirror, klab says which
// flag names one.
func TestNoMirrorHint(t *testing.T) {
	g := &globalOptions{}
	root := newRootCommandWith(g)
	root.AddCommand(&cobra.Command{Use: "fetch", RunE: func(*cobra.Command, []string) error {
		return fmt.Errorf("fetch debian:7.3: %w: set KLAB_DEBIAN_MIRROR", apt.ErrNoMirror)
	}})
	var stderr strings.Builder
	code := runRoot(root, g, []string{"fetch", "--cache-dir", t.TempDir(), "--runs-dir", t.TempDir()}, &stderr)
	if code != lab.ExitInfra || !strings.HasSuffix(stderr.String(), "set KLAB_DEBIAN_MIRROR; or give --debian-mirror URI\n") {
		t.Errorf("status %d, stderr %q", code, stderr.String())
	}
}

// runCLI runs klab in-process with private cache and runs directories and
// returns its status and what it wrote to its stdout and stderr.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	g := &globalOptions{}
	root := newRootCommandWith(g)
	var out, errb strings.Builder
	root.SetOut(&out)
	root.SetErr(&errb)
	args = append([]string{"--cache-dir", t.TempDir(), "--runs-dir", t.TempDir()}, args...)
	code = runRoot(root, g, args, &errb)
	return code, out.String(), errb.String()
}

// allCommands are c and every command below it.
func allCommands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, sub := range c.Commands() {
		out = append(out, allCommands(sub)...)
	}
	return out
}

// groups are the command groups of klab's tree: the commands that hold
// subcommands one can see, root included.
func groups(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	if c.HasAvailableSubCommands() {
		out = append(out, c)
	}
	for _, sub := range c.Commands() {
		out = append(out, groups(sub)...)
	}
	return out
}

// TestUnknownSubcommand: every command group fails with status 2 on an
// unknown subcommand, suggests the one a typo meant, and prints its help
// when given none.
func TestUnknownSubcommand(t *testing.T) {
	gs := groups(newRootCommand())
	if len(gs) < 8 {
		t.Fatalf("only %d command groups found", len(gs))
	}
	for _, group := range gs {
		path := strings.Fields(group.CommandPath())[1:]
		var first string
		for _, c := range group.Commands() {
			if n := c.Name(); c.IsAvailableCommand() && len(n) >= 3 && n[1] != n[2] {
				first = c.Name()
				break
			}
		}
		typo := first[:1] + first[2:3] + first[1:2] + first[3:] // list → lsit
		for _, tc := range []struct{ arg, want string }{
			{"nope", `unknown command "nope" for "` + group.CommandPath() + `"`},
			{typo, "did you mean " + first},
		} {
			code, stdout, stderr := runCLI(t, append(path, tc.arg)...)
			if code != exitBadInput || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("klab %s %s: status %d, stdout %q, stderr %q; want status 2 and %q",
					strings.Join(path, " "), tc.arg, code, stdout, stderr, tc.want)
			}
		}
		if code, stdout, stderr := runCLI(t, path...); code != 0 || !strings.Contains(stdout, "Available Commands:") {
			t.Errorf("klab %s: status %d, stdout %q, stderr %q; want its help", strings.Join(path, " "), code, stdout, stderr)
		}
	}
	// Leaf commands' argument errors are bad input too.
	if code, _, stderr := runCLI(t, "runs", "show"); code != exitBadInput || !strings.Contains(stderr, "accepts 1 arg(s)") {
		t.Errorf("runs show: status %d, %q", code, stderr)
	}
}

// TestUnknownFlagSuggests: every command refuses a mistyped flag with
// status 2 and names the flag it has that the typo meant, its own or one
// it inherits; a flag near none of them gets no suggestion.
func TestUnknownFlagSuggests(t *testing.T) {
	n := 0
	for _, c := range allCommands(newRootCommand()) {
		path := strings.Fields(c.CommandPath())[1:]
		if len(path) == 0 || c.Annotations[groupAnnotation] != "" || !c.Runnable() {
			continue
		}
		c.InitDefaultHelpFlag()
		flag := "runs-dir" // inherited by every command
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if flag == "runs-dir" && !f.Hidden && f.Name != "help" && len(f.Name) >= 3 {
				flag = f.Name
			}
		})
		typo := flag[:len(flag)-2] + flag[len(flag)-1:] + flag[len(flag)-2:len(flag)-1] // json → jsno
		if typo == flag || c.Flags().Lookup(typo) != nil {
			typo = flag + "z"
		}
		want := "unknown flag: --" + typo + " (did you mean "
		code, stdout, stderr := runCLI(t, append(path, "--"+typo)...)
		if code != exitBadInput || !strings.HasPrefix(stderr, "klab: "+want) || !strings.Contains(stderr, "--"+flag) || stdout != "" {
			t.Errorf("klab %s --%s: status %d, stdout %q, stderr %q; want status 2 and %q...--%s", strings.Join(path, " "), typo, code, stdout, stderr, want, flag)
		}
		n++
	}
	if n < 30 {
		t.Errorf("only %d commands tried", n)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--round", "3", "fuse-transport"}, "klab: unknown flag: --round (did you mean --rounds?)\n"},
		{[]string{"run", "fuse-transport", "--kernel=debian:7.3", "--Rounds=3"}, "klab: unknown flag: --Rounds (did you mean --rounds?)\n"},
		{[]string{"run", "-rounds", "3", "fuse-transport"}, "klab: unknown shorthand flag: 'r' in -rounds (did you mean --rounds?)\n"},
		{[]string{"boot", "--kernl", "debian:7.3", "--", "true"}, "klab: unknown flag: --kernl (did you mean --kernel?)\n"},
		{[]string{"kernels", "gc", "--max_size", "1G"}, "klab: unknown flag: --max_size (did you mean --max-size?)\n"},
		{[]string{"runs", "list", "--cache-dri", "x"}, "klab: unknown flag: --cache-dri (did you mean --cache-dir?)\n"},
		{[]string{"runs", "list", "--colour"}, "klab: unknown flag: --colour\n"},
		{[]string{"run", "-Z"}, "klab: unknown shorthand flag: 'Z' in -Z\n"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != exitBadInput || stderr != tc.want {
			t.Errorf("klab %s: status %d, stderr %q; want 2 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
}

// TestGuestCommandHint: a guest command given to klab boot without "--"
// whose flags klab does not know gets a hint with the command line that
// works; other commands' flag errors get none.
func TestGuestCommandHint(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"boot", "--kernel", "debian:7.3", "uname", "-r"}, exitBadInput,
			"unknown shorthand flag: 'r' in -r: put the guest command after --, e.g. klab boot --kernel debian:7.3 -- uname -r\n"},
		{[]string{"boot", "-vk", "debian:7.3", "-m", "2G", "ls", "--color", "/tmp/a b"}, exitBadInput,
			"unknown flag: --color: put the guest command after --, e.g. klab boot -vk debian:7.3 -m 2G -- ls --color '/tmp/a b'\n"},
		{[]string{"boot", "--kernel=debian:7.3", "--cpus", "1", "sh", "-c", "echo hi"}, exitBadInput,
			"klab boot --kernel=debian:7.3 --cpus 1 -- sh -c 'echo hi'\n"},
		{[]string{"shell", "--kernel", "debian:7.3", "uname", "-r"}, exitBadInput,
			"klab shell runs no command; to run one: klab boot --kernel debian:7.3 -- uname -r\n"},
		{[]string{"shell", "--kernel", "debian:7.3", "uname"}, exitBadInput,
			"klab shell runs no command; to run one: klab boot --kernel debian:7.3 -- uname\n"},
		{[]string{"boot", "--bogus", "--kernel", "debian:7.3"}, exitBadInput, "unknown flag: --bogus\n"},
		{[]string{"run", "fuse-transport", "--bogus"}, exitBadInput, "unknown flag: --bogus\n"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		// runCLI puts the private directories first.
		stderr = regexp.MustCompile(`--cache-dir \S+ --runs-dir \S+ `).ReplaceAllString(stderr, "")
		if code != tc.code || !strings.HasSuffix(stderr, tc.want) {
			t.Errorf("klab %q: status %d, stderr %q; want status %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
		if strings.Contains(tc.want, "--bogus") && strings.Contains(stderr, "guest command") {
			t.Errorf("klab %q: a hint without a guest command: %q", tc.args, stderr)
		}
	}
}

// TestVersionFlag: klab --version prints what klab version prints: the
// version, the commit and the protocol version.
func TestVersionFlag(t *testing.T) {
	_, flag, _ := runCLI(t, "--version")
	_, cmd, _ := runCLI(t, "version")
	want := fmt.Sprintf(", protocol v%d\n", proto.Version)
	if flag != cmd || !strings.HasPrefix(flag, "klab ") || !strings.Contains(flag, ", commit ") || !strings.HasSuffix(flag, want) {
		t.Errorf("klab --version %q, klab version %q; want the same, with the commit and %q", flag, cmd, want)
	}
}

// TestHelpListsAgree: the Debian series and flavours that --help texts
// list are the ones images names in its errors, and every --flavour flag
// lists them all.
func TestHelpListsAgree(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	inParens := regexp.MustCompile(`\(([0-9., ]+)\)`)
	// images' own errors list what it accepts.
	var fromErrors [][]string
	_, err := images.ResolveKernel(ctx, "fedora:40", images.ResolveOptions{Debian: debian.Options{CacheDir: cache}})
	if m := inParens.FindStringSubmatch(fmt.Sprint(err)); m != nil {
		fromErrors = append(fromErrors, strings.Split(m[1], ", "))
	} else {
		t.Errorf("images.ResolveKernel's error lists no series: %v", err)
	}
	_, err = debian.FetchSource(ctx, "debian:nope", debian.Options{CacheDir: cache})
	if m := inParens.FindStringSubmatch(fmt.Sprint(err)); m != nil {
		fromErrors = append(fromErrors, strings.Split(m[1], ", "))
	} else {
		t.Errorf("debian.FetchSource's error lists no series: %v", err)
	}
	for _, s := range fromErrors {
		if !slices.Equal(s, debianSeries()) {
			t.Errorf("images lists the series %q, klab's help %q", s, debianSeries())
		}
	}
	_, err = debian.Fetch(ctx, "debian:7.3", debian.Options{CacheDir: cache, Flavour: "nope"})
	if m := regexp.MustCompile(`want (.*)$`).FindStringSubmatch(fmt.Sprint(err)); m == nil || m[1] != orList(debianFlavours()) {
		t.Errorf("images' flavour error %q; klab's help says %s", err, orList(debianFlavours()))
	}
	if debianFlavours()[0] != debian.DefaultFlavour {
		t.Errorf("the first flavour %s is not images' default %s", debianFlavours()[0], debian.DefaultFlavour)
	}

	// Every list of series or flavours in the help texts is the whole list.
	seriesList := regexp.MustCompile(`[0-9]+\.[0-9]+(?:(?:, |,? or )[0-9]+\.[0-9]+)+`)
	flavourList := regexp.MustCompile(`[a-z-]*amd64(?:(?:, |,? or )[a-z-]*amd64)+`)
	split := regexp.MustCompile(`,? or |, `)
	check := func(where, text string) {
		for _, l := range seriesList.FindAllString(text, -1) {
			if got := split.Split(l, -1); !slices.Equal(got, debianSeries()) {
				t.Errorf("%s lists the series %q, want %q", where, got, debianSeries())
			}
		}
		for _, l := range flavourList.FindAllString(text, -1) {
			if got := split.Split(l, -1); !slices.Equal(got, debianFlavours()) {
				t.Errorf("%s lists the flavours %q, want %q", where, got, debianFlavours())
			}
		}
	}
	flavourFlags := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check(c.CommandPath(), c.Short+"\n"+c.Long+"\n"+c.Example)
		c.Flags().VisitAll(func(f *pflag.Flag) {
			check(c.CommandPath()+" --"+f.Name, f.Usage)
			if f.Name == "flavour" {
				flavourFlags++
				if !strings.HasSuffix(f.Usage, orList(debianFlavours())) {
					t.Errorf("%s --flavour: %q does not list every flavour", c.CommandPath(), f.Usage)
				}
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
	if flavourFlags == 0 {
		t.Error("no --flavour flag found")
	}
}

// TestJSONListsEmpty: --json lists print [] when there is nothing to
// list, never null.
func TestJSONListsEmpty(t *testing.T) {
	clean := filepath.Join(t.TempDir(), "console.log")
	if err := os.WriteFile(clean, []byte("[    0.000000] Linux version 7.3.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"kernels", "list", "--json"},
		{"runs", "list", "--json"},
		{"splats", "parse", "--json", clean},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 || strings.TrimSpace(stdout) != "[]" {
			t.Errorf("klab %q: status %d, stdout %q, stderr %q; want []", args, code, stdout, stderr)
		}
	}
	var b strings.Builder
	if err := writeJSON(&b, []int(nil)); err != nil || b.String() != "[]\n" {
		t.Errorf("writeJSON(nil slice) = %q, %v", b.String(), err)
	}
	code, stdout, _ := runCLI(t, "experiments", "list", "--json")
	var list []experimentEntry
	if err := json.Unmarshal([]byte(stdout), &list); code != 0 || err != nil || len(list) == 0 || list[0].Name == "" {
		t.Errorf("experiments list --json: status %d, %v: %q", code, err, stdout)
	}
}
