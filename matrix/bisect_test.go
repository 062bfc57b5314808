package matrix

import (
	"bytes"
	"context"
	"fmt"
	stdhtml "html"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"klab/guest/proto"
	"klab/lab"
	"klab/results"
	"klab/results/splat"
	"klab/results/xreport"
)

// bisectSpec is measured per kernel, with a threshold and a check.
const bisectSpec = `name: bx
rounds: 4
workloads:
  - name: create
    pattern: create
    dir: /tmp/c
    jobs: 1
    files: 10
    threshold_pct: 10
checks:
  - name: ok
    run: "true"
`

// Kernels of one tree at two commits (old, new), a build with another
// patch (other) and a Debian kernel.
var (
	oldCommit = strings.Repeat("a", 40)
	newCommit = strings.Repeat("b", 40)
	labFrag   = []results.FileHash{{Path: "lab", SHA256: "f1"}}
)

func bisectKernel(ref string) *results.Kernel {
	k := &results.Kernel{Name: ref, ID: "k-" + ref, Version: "7.3.4", Source: "build"}
	switch ref {
	case "build:old":
		k.Build = &results.KernelBuild{Tree: "/src/linux", BaseCommit: oldCommit, Fragments: labFrag}
	case "build:new":
		k.Build = &results.KernelBuild{Tree: "/src/linux", BaseCommit: newCommit, Fragments: labFrag}
	case "build:other":
		k.Build = &results.KernelBuild{Tree: "/src/linux", BaseCommit: newCommit, Fragments: labFrag, Patches: []results.FileHash{{Path: "/p/x.patch", SHA256: "p1"}}}
	case "debian:7.3":
		k.Source = "debian"
	default:
		return nil
	}
	return k
}

// bisectOpener boots guests where the new commit prints a WARNING,
// fails the check and creates 40% slower; so does every other kernel
// but the old one.
type bisectOpener struct {
	mu sync.Mutex
	n  int
}

func (o *bisectOpener) ResolveKernel(_ context.Context, ref string) (*results.Kernel, error) {
	if k := bisectKernel(ref); k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("no kernel %q", ref)
}

func (o *bisectOpener) Open(_ context.Context, req lab.BootRequest) (lab.Guest, error) {
	o.mu.Lock()
	o.n++
	n := o.n
	o.mu.Unlock()
	g := &bisectGuest{old: req.Kernel == "build:old", n: n, dir: filepath.Join(req.RunsDir, fmt.Sprintf("g-%d", n))}
	return g, os.MkdirAll(g.dir, 0o755)
}

type bisectGuest struct {
	old bool
	n   int
	dir string
}

func (g *bisectGuest) Run(_ context.Context, steps []proto.Step) ([]lab.StepResult, error) {
	var out []lab.StepResult
	for _, st := range steps {
		d := proto.Done{Step: st.ID, DurationNs: 1e6}
		if st.Workload != nil {
			v := 60.0
			if g.old {
				v = 100
			}
			d.Metrics = &proto.Metrics{Name: st.Workload.Name, Pattern: string(st.Workload.Pattern), Jobs: 1, OpsPerSec: v + float64(g.n%3)}
		}
		if st.Kind == proto.StepExec && slices.Equal(st.Argv, []string{"sh", "-c", "true"}) && !g.old {
			d.ExitCode = 1
		}
		out = append(out, lab.StepResult{Step: st, Done: d})
	}
	return out, nil
}

func (g *bisectGuest) Close() (*lab.BootResult, error) {
	res := &lab.BootResult{RunDir: g.dir, BootToAgent: time.Millisecond, Wall: time.Second}
	if !g.old {
		res.Splats = []splat.Report{{Type: splat.TypeWarning, Title: "WARNING in fuse_open", Frames: []string{}}}
	}
	return res, nil
}

// TestReportBisects: a failure new on a kernel built from another
// commit of the baseline's tree, with its config and patches, gets the
// klab bisect command that chases it, in the report's every format: a
// new splat (once per kernel), a failing check, a row past its
// threshold. A kernel of another kind, or with other patches, gets
// none.
func TestReportBisects(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bx.yaml"), []byte(bisectSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	m := "name: b\nbaseline: build:old\nkernels: [build:old, build:new, build:other, debian:7.3]\nexperiments: [bx.yaml]\n"
	if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := LoadFile(filepath.Join(dir, "m.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := Run(context.Background(), f, Options{Out: filepath.Join(dir, "out"), Jobs: 1, Opener: &bisectOpener{}})
	if err != nil {
		t.Fatal(err)
	}
	x := tree.Report()
	spec := filepath.Join(dir, "bx.yaml")
	head := []string{"klab", "bisect", "--tree", "/src/linux", "--good", oldCommit[:12], "--bad", newCommit[:12]}
	want := []xreport.Bisect{
		{Experiment: "bx", Kernel: "build:new", Failure: "new kernel splat: WARNING in fuse_open", Argv: append(slices.Clone(head), "--splat", "WARNING in fuse_open", spec)},
		{Experiment: "bx", Kernel: "build:new", Failure: "check ok fails", Argv: append(slices.Clone(head), "--check", "ok", spec)},
	}
	if len(x.Bisects) != 3 {
		t.Fatalf("bisects %+v, want 3", x.Bisects)
	}
	for i, w := range want {
		if g := x.Bisects[i]; g.Experiment != w.Experiment || g.Kernel != w.Kernel || g.Failure != w.Failure || !slices.Equal(g.Argv, w.Argv) {
			t.Errorf("bisect %d:\n%+v\nwant\n%+v", i, g, w)
		}
	}
	if g := x.Bisects[2]; !strings.HasPrefix(g.Failure, "row create -39.") || !strings.Contains(g.Failure, "against build:old (threshold 10%)") ||
		!slices.Equal(g.Argv, append(slices.Clone(head), "--row", "create", spec)) {
		t.Errorf("the row's bisect %+v", g)
	}
	var text, md, html bytes.Buffer
	for _, w := range []struct {
		b *bytes.Buffer
		f string
	}{{&text, "text"}, {&md, "md"}, {&html, "html"}} {
		if err := xreport.Write(w.b, x, w.f); err != nil {
			t.Fatal(err)
		}
	}
	cmd := "klab bisect --tree /src/linux --good " + oldCommit[:12] + " --bad " + newCommit[:12] + " --splat 'WARNING in fuse_open'"
	joined := regexp.MustCompile(` \\\n\s+`)
	for name, s := range map[string]string{"text": text.String(), "md": md.String(), "html": stdhtml.UnescapeString(html.String())} {
		s = joined.ReplaceAllString(s, " ")
		if !strings.Contains(strings.NewReplacer(`\_`, "_", "`", "").Replace(s), "bx on build:new: new kernel splat: WARNING in fuse_open") || !strings.Contains(s, cmd) {
			t.Errorf("the %s report lacks the command %q:\n%s", name, cmd, s)
		}
	}
	if !strings.Contains(joined.ReplaceAllString(text.String(), " "), "\n    "+cmd) {
		t.Errorf("the text report's command is not indented on its own line:\n%s", text.String())
	}
	for _, l := range strings.Split(text.String(), "\n") {
		if len(l) > xreport.TextWidth {
			t.Errorf("text line of %d columns: %q", len(l), l)
		}
	}
}

// TestBisectArgvQuoting: the command takes the good build's config and
// patches (an mbox once), a shipped spec by its name, and the cell's
// --set overrides; sameTree holds only between two commits of one tree
// built alike.
func TestBisectArgvQuoting(t *testing.T) {
	c := &bisectCell{spec: "experiments/fuse-transport.yaml", sets: map[string]string{"transport": "dev", "jobs": "1"}}
	good, bad := *bisectKernel("build:old"), *bisectKernel("build:new")
	good.Build.Fragments = []results.FileHash{{Path: "lab"}, {Path: "debug"}}
	good.Build.Patches = []results.FileHash{{Path: "/p/s.mbox#1"}, {Path: "/p/s.mbox#2"}, {Path: "/p/x.patch"}}
	got := bisectArgv(good, bad, c, []string{"--splat", "it's"})
	want := []string{"klab", "bisect", "--tree", "/src/linux", "--good", oldCommit[:12], "--bad", newCommit[:12], "--config", "lab,debug",
		"--patch", "/p/s.mbox", "--patch", "/p/x.patch", "--splat", "it's", "fuse-transport", "--set", "jobs=1", "--set", "transport=dev"}
	if !slices.Equal(got, want) {
		t.Errorf("argv %q\nwant %q", got, want)
	}
	if sameTree(good, *bisectKernel("build:other")) || sameTree(*bisectKernel("build:old"), *bisectKernel("debian:7.3")) || sameTree(bad, bad) {
		t.Error("sameTree holds for kernels klab bisect cannot walk between")
	}
}
