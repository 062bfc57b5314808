package e2e

import (
	"cmp"
	"context"
	"os"
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
	"klab/results"
)

// userspaceCheck runs in the userspace: the shell, perl and xfs_io that
// fstests needs, its users (su through PAM too), a read-only root with a
// writable /tmp, and lo up (flags odd: IFF_UP).
const userspaceCheck = `echo "bash=$BASH_VERSION"; xfs_io -V; id fsgqa; su fsgqa2 -c id
perl -e 'print "perl=ok\n"'; awk 'BEGIN { print "awk=ok" }'
touch /tmp/t && echo tmp=rw; touch /ro 2>/dev/null || echo root=ro
touch /var/lib/t && test -d /var/lib/xfsprogs && echo varlib=rw
echo "lo=$(( $(cat /sys/class/net/lo/flags) & 1 ))"`

// bootUserspace boots kernel with img attached and runs script in it.
func bootUserspace(ctx context.Context, t *testing.T, o *lab.Options, k *results.Kernel, img *userspace.Image, script string) (*lab.BootResult, string, error) {
	t.Helper()
	att, err := userspace.Attach(img, k)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var out strings.Builder
	res, err := o.Boot(ctx, lab.BootRequest{
		Kernel:   k.Name,
		Resolved: k,
		Console:  &logWriter{t: t, prefix: "console| "},
		QEMUArgs: att.QEMUArgs,
		Modules:  att.Modules,
		Steps:    []proto.Step{att.Step},
		Argv:     []string{"bash", "-c", script},
		Root:     userspace.GuestRoot,
		OnMessage: func(m *proto.Message) {
			mu.Lock()
			defer mu.Unlock()
			switch m.Kind {
			case proto.KindOutput:
				out.Write(m.Output.Data)
			case proto.KindLog:
				t.Logf("agent| %s", m.Log.Msg)
			}
		},
		Command: []string{"go", "test", "-run", t.Name()},
	})
	if res != nil && res.Manifest != nil {
		t.Logf("qemu: %s", strings.Join(res.Manifest.QEMU.Argv, " "))
	}
	mu.Lock()
	defer mu.Unlock()
	return res, out.String(), err
}

// TestUserspaceInGuest builds the default userspace (what fstests needs)
// and runs commands chrooted into it on debian:7.3, whose virtio-blk is a
// module, or on the kernel KLAB_USERSPACE_KERNEL names (a lab build, for
// instance, which has it built in).
func TestUserspaceInGuest(t *testing.T) {
	testenv.E2E(t)
	testenv.RequiresCommand(t, "mke2fs")
	testenv.RequiresCommand(t, "dpkg-deb")
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
	res, out, err := bootUserspace(ctx, t, o, k, img, userspaceCheck)
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
// to a boot of debian:7.3 (KLAB_USERSPACE_COST=1): boot to agent (the
// virtio_blk module and the disk's probe) and the userspace step (mount,
// tmpfs, binds, lo), against a plain boot, in alternated pairs.
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
	var plain, with, mount []time.Duration
	for round := 0; round < 3; round++ {
		res, err := o.Boot(ctx, lab.BootRequest{Kernel: k.Name, Resolved: k, Argv: []string{"true"}})
		if err != nil {
			t.Fatalf("plain boot: %v", err)
		}
		plain = append(plain, res.BootToAgent)
		res, out, err := bootUserspace(ctx, t, o, k, img, "true")
		if err != nil {
			t.Fatalf("userspace boot: %v\n%s", err, out)
		}
		with = append(with, res.BootToAgent)
		mount = append(mount, time.Duration(res.Steps[0].Done.DurationNs))
		t.Logf("round %d: boot to agent %v plain, %v with the disk; userspace step %v", round+1,
			plain[round].Round(time.Millisecond), with[round].Round(time.Millisecond), mount[round].Round(time.Millisecond))
	}
	median := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2].Round(time.Millisecond)
	}
	t.Logf("medians: boot to agent %v plain, %v with the disk; userspace step %v", median(plain), median(with), median(mount))
}
