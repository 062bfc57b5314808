package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"klab/guest/proto"
	"klab/images/debian"
	"klab/images/userspace"
	"klab/internal/paths"
	"klab/internal/testenv"
	"klab/lab"
)

// userspaceCheck runs in the userspace: the shell, perl and xfs_io that
// fstests needs, its users (su through PAM too), a read-only root with a
// writable /tmp, and lo up (flags odd: IFF_UP).
const userspaceCheck = `echo "bash=$BASH_VERSION"; xfs_io -V; id fsgqa; su fsgqa2 -c id
perl -e 'print "perl=ok\n"'; awk 'BEGIN { print "awk=ok" }'
touch /tmp/t && echo tmp=rw; touch /ro 2>/dev/null || echo root=ro
touch /var/lib/t && test -d /var/lib/xfsprogs && echo varlib=rw
echo "lo=$(( $(cat /sys/class/net/lo/flags) & 1 ))"`

// bootUserspace boots req (its kernel resolved) with img attached and
// runs script in it.
func bootUserspace(ctx context.Context, t *testing.T, o *lab.Options, req lab.BootRequest, img *userspace.Image, script string) (*lab.BootResult, string, error) {
	t.Helper()
	att, err := userspace.Attach(img, req.Resolved)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var out strings.Builder
	req.QEMUArgs = append(req.QEMUArgs, att.QEMUArgs...)
	req.Modules = append(req.Modules, att.Modules...)
	req.Steps = append([]proto.Step{att.Step}, req.Steps...)
	req.Argv, req.Root = []string{"bash", "-c", script}, userspace.GuestRoot
	req.Command = []string{"go", "test", "-run", t.Name()}
	req.OnMessage = collect(t, &mu, &out)
	res, err := o.Boot(ctx, req)
	if res != nil && res.Manifest != nil {
		t.Logf("qemu: %s", strings.Join(res.Manifest.QEMU.Argv, " "))
	}
	mu.Lock()
	defer mu.Unlock()
	return res, out.String(), err
}

// collect is a BootRequest.OnMessage that keeps the output in out and
// logs the agent's lines.
func collect(t *testing.T, mu *sync.Mutex, out *strings.Builder) func(*proto.Message) {
	return func(m *proto.Message) {
		mu.Lock()
		defer mu.Unlock()
		switch m.Kind {
		case proto.KindOutput:
			out.Write(m.Output.Data)
		case proto.KindLog:
			t.Logf("agent| %s", m.Log.Msg)
		}
	}
}

// TestUserspaceInGuest builds the default userspace (what fstests needs)
// and runs commands chrooted into it on debian:7.3, whose virtio-blk is a
// module, or on the kernel KLAB_USERSPACE_KERNEL names (a lab build, for
// instance, which has it built in). It times nothing, so it runs beside
// other tests.
func TestUserspaceInGuest(t *testing.T) {
	testenv.E2E(t)
	testenv.RequiresCommand(t, "mke2fs")
	testenv.RequiresCommand(t, "dpkg-deb")
	parallelGuest(t)
	ctx := testContext(t, 20*time.Minute)
	cache := paths.CacheDir()
	start := time.Now()
	img, err := userspace.Build(ctx, userspace.Spec{}, userspace.Options{
		Debian: debian.Options{CacheDir: cache}, Progress: &logWriter{t: t, prefix: "userspace| "},
	})
	if err != nil {
		t.Fatal(err)
	}
	d := img.Descriptor
	t.Logf("userspace %s: %d packages, %d MiB image, cached %v, in %.1fs", d.ID, len(d.Packages), d.ImageBytes>>20, img.Cached, time.Since(start).Seconds())
	if !slices.ContainsFunc(d.Packages, func(p userspace.Package) bool { return p.Name == "xfsprogs" && p.Version != "" }) {
		t.Errorf("the descriptor lacks xfsprogs: %+v", d.Packages)
	}
	o := &lab.Options{CacheDir: cache, RunsDir: t.TempDir(), Progress: &logWriter{t: t, prefix: "klab| "}}
	k, err := o.ResolveKernel(ctx, cmp.Or(os.Getenv("KLAB_USERSPACE_KERNEL"), "debian:7.3"))
	if err != nil {
		t.Fatal(err)
	}
	req := lab.BootRequest{Kernel: k.Name, Resolved: k, Console: &logWriter{t: t, prefix: "console| "}}
	res, out, err := bootUserspace(ctx, t, o, req, img, userspaceCheck)
	if err != nil {
		t.Fatalf("Boot: %v\n%s", err, out)
	}
	for i, s := range res.Steps {
		if s.Done.ExitCode != 0 || s.Done.Error != "" {
			t.Fatalf("step %d (%s): %+v\n%s", i+1, s.Step.Kind, s.Done, out)
		}
	}
	t.Logf("output:\n%s", out)
	t.Logf("boot to agent %v; mount %v; command %v",
		res.BootToAgent.Round(time.Millisecond), time.Duration(res.Steps[0].Done.DurationNs).Round(time.Millisecond),
		time.Duration(res.Steps[1].Done.DurationNs).Round(time.Millisecond))
	for _, want := range []string{"bash=5.", "xfs_io version ", "uid=1000(fsgqa) gid=1000(fsgqa)", "uid=1001(fsgqa2)",
		"perl=ok", "awk=ok", "tmp=rw", "root=ro", "varlib=rw", "lo=1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}

// TestUserspaceBootCost measures what attaching the default userspace adds
// to a boot of debian:7.3 (KLAB_USERSPACE_COST=1), against a plain boot,
// in alternated pairs: boot to agent as the host sees it, the agent's own
// set-up (which loads virtio_blk) from its Hello, and the userspace step
// (mount, tmpfs, binds, lo).
func TestUserspaceBootCost(t *testing.T) {
	testenv.OptIn(t, "KLAB_USERSPACE_COST", "boot cost of a userspace (boots 6 guests)")
	testenv.E2E(t)
	ctx := testContext(t, 30*time.Minute)
	cache := paths.CacheDir()
	img, err := userspace.Build(ctx, userspace.Spec{}, userspace.Options{Debian: debian.Options{CacheDir: cache}})
	if err != nil {
		t.Fatal(err)
	}
	o := &lab.Options{CacheDir: cache, RunsDir: t.TempDir()}
	k, err := o.ResolveKernel(ctx, "debian:7.3")
	if err != nil {
		t.Fatal(err)
	}
	base := lab.BootRequest{Kernel: k.Name, Resolved: k}
	var plain, with, plainSetup, withSetup, mount []time.Duration
	for round := 0; round < 3; round++ {
		req := base
		req.Argv = []string{"true"}
		res, err := o.Boot(ctx, req)
		if err != nil {
			t.Fatalf("plain boot: %v", err)
		}
		plain, plainSetup = append(plain, res.BootToAgent), append(plainSetup, helloSetup(t, res))
		res, out, err := bootUserspace(ctx, t, o, base, img, "true")
		if err != nil {
			t.Fatalf("userspace boot: %v\n%s", err, out)
		}
		with, withSetup = append(with, res.BootToAgent), append(withSetup, helloSetup(t, res))
		mount = append(mount, time.Duration(res.Steps[0].Done.DurationNs))
		t.Logf("round %d: boot to agent %v plain, %v with the disk; agent set-up %v, %v; userspace step %v", round+1,
			plain[round].Round(time.Millisecond), with[round].Round(time.Millisecond),
			plainSetup[round].Round(time.Millisecond), withSetup[round].Round(time.Millisecond), mount[round].Round(time.Millisecond))
	}
	median := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2].Round(time.Millisecond)
	}
	t.Logf("medians: boot to agent %v plain, %v with the disk; agent set-up %v, %v; userspace step %v",
		median(plain), median(with), median(plainSetup), median(withSetup), median(mount))
}

// helloSetup is how long the agent's set-up (mounts, module loads) took,
// from the Hello in the run's events.jsonl.
func helloSetup(t *testing.T, res *lab.BootResult) time.Duration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(res.RunDir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		var rec struct {
			Event lab.Event `json:"event"`
		}
		if e := &rec.Event; json.Unmarshal([]byte(line), &rec) == nil && e.Kind == "hello" && e.Hello != nil {
			return time.Duration(e.Hello.SetupNanos)
		}
	}
	t.Fatalf("no hello in %s", res.RunDir)
	return 0
}
