package experiments

import (
	"slices"
	"strings"
	"testing"

	"klab/guest/proto"
)

// mountSpec is a spec with a server, a workload with a prepare and two
// checks, the first of them run on the mount.
const mountSpec = `
name: m
server: {kind: passthrough, backing: /tmp/b, mountpoint: /mnt/fuse}
workloads:
  - name: w
    pattern: create
    dir: /mnt/fuse/w
    jobs: 1
    files: 10
    prepare: rm -rf /tmp/b/w
    prepare_mount: PREPARE_MOUNT
checks:
  - {name: on-mount, run: "echo x > /mnt/fuse/f && test -e /tmp/b/f", mount: true, timeout_s: 30}
  - {name: after, run: "test -e /tmp/b/f"}
`

// TestMountedCheckStep: a check with mount: true runs inside a fuse step
// of the spec's server (mounted, the check, unmounted), after the
// workload's; a check without it runs bare, after both. prepare_mount
// puts the prepare in a fuse step of its own, before the workload's.
func TestMountedCheckStep(t *testing.T) {
	for _, pm := range []bool{false, true} {
		f, err := Load("t.yaml", yml(strings.Replace(mountSpec, "PREPARE_MOUNT", map[bool]string{false: "false", true: "true"}[pm], 1)))
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Warnings) != 0 {
			t.Errorf("warnings %v, want none", f.Warnings)
		}
		p, err := MakePlan(f, PlanOptions{Kernels: []string{"k"}, Rounds: 1, Single: true})
		if err != nil {
			t.Fatal(err)
		}
		g := &guestRun{runner: &runner{f: f, plan: p}, gp: p.Guests[0]}
		if err := g.compile(); err != nil {
			t.Fatal(err)
		}
		// Each step's shape: "fuse(exec)" for a step inside a mount.
		var got []string
		var ids []int
		for _, it := range g.units[0].items {
			for _, st := range it.steps {
				ids = append(ids, st.ID)
				switch {
				case st.Kind == proto.StepFUSE && st.FUSE.Then != nil:
					if st.FUSE.Mountpoint != "/mnt/fuse" || st.FUSE.Backing != "/tmp/b" {
						t.Errorf("fuse step on %s backed by %s", st.FUSE.Mountpoint, st.FUSE.Backing)
					}
					got = append(got, "fuse("+shape(*st.FUSE.Then)+")")
				default:
					got = append(got, shape(st))
				}
			}
		}
		prepare := "exec(rm -rf /tmp/b/w)"
		if pm {
			prepare = "fuse(" + prepare + ")"
		}
		want := []string{prepare, "fuse(workload)", "fuse(exec(echo x > /mnt/fuse/f && test -e /tmp/b/f))", "exec(test -e /tmp/b/f)"}
		if !slices.Equal(got, want) {
			t.Errorf("prepare_mount %v: steps %q, want %q", pm, got, want)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Errorf("step IDs %v, want increasing", ids)
			}
		}
		items := g.units[0].items
		last := items[len(items)-2]
		if last.check == nil || last.check.Name != "on-mount" || last.id != last.steps[0].ID {
			t.Errorf("the mounted check's result is not read from its fuse step: %+v", last)
		}
		if then := last.steps[0].FUSE.Then; then.TimeoutMs != 30000 || then.ID != 0 {
			t.Errorf("mounted check's inner step: timeout %d ms, id %d; want 30000 and 0 (the fuse step's)", then.TimeoutMs, then.ID)
		}
	}
}

// shape is a step as "exec(COMMAND)" or its kind.
func shape(st proto.Step) string {
	if st.Kind == proto.StepExec && len(st.Argv) == 3 {
		return "exec(" + st.Argv[2] + ")"
	}
	return string(st.Kind)
}

// TestMountProblems: mount: true on a check, and prepare_mount: true,
// need a server (and a run, and a prepare); the errors say where.
func TestMountProblems(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"check without server", `
name: m
checks:
  - name: c
    run: "true"
    mount: true
`, []string{"t.yaml:5:12: checks[0].mount: true, but the experiment has no server to mount (mount: true runs the check while the server is mounted)"}},
		{"fuse_check on the mount", `
name: m
server: {kind: passthrough, backing: /tmp/b, mountpoint: /mnt/fuse}
checks:
  - {name: c, fuse_check: kill, mount: true}
`, []string{"t.yaml:4:40: checks[0].mount: only for run; fuse_check kill mounts a server of its own"}},
		{"prepare_mount without server", `
name: m
workloads:
  - name: w
    pattern: create
    dir: /tmp/w
    jobs: 1
    files: 10
    prepare: rm -rf /tmp/w
    prepare_mount: true
`, []string{"t.yaml:9:20: workloads[0].prepare_mount: true, but the experiment has no server to mount"}},
		{"prepare_mount without prepare", `
name: m
server: {kind: passthrough, backing: /tmp/b, mountpoint: /mnt/fuse}
workloads:
  - {name: w, pattern: create, dir: /mnt/fuse/w, jobs: 1, files: 10, prepare_mount: true}
`, []string{"t.yaml:4:85: workloads[0].prepare_mount: true, but the workload has no prepare to run"}},
		{"fuse_check in the userspace", `
name: m
server: {kind: passthrough, backing: /tmp/b, mountpoint: /mnt/fuse}
checks:
  - {name: c, fuse_check: kill, userspace: true}
`, []string{"t.yaml:4:44: checks[0].userspace: only for run; fuse_check kill runs klab's agent, which is not in the userspace"}},
		{"mountpoint out of the userspace's reach", `
name: m
server: {kind: passthrough, backing: /tmp/b, mountpoint: /srv/fuse}
checks:
  - {name: c, run: "stat /srv/fuse", mount: true, userspace: true}
`, []string{"t.yaml:4:62: checks[0].userspace: the server's mountpoint /srv/fuse is seen in the userspace only under one of /tmp, /var/tmp, /run, /mnt, /root, /var/log, /var/lib (the rest of it is read-only)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("t.yaml", yml(tc.yaml))
			if err == nil {
				t.Fatal("loaded")
			}
			if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestMountWarnings: a check or a prepare that names the mountpoint but
// runs with the server unmounted gets a warning at its run (prepare);
// one on the mount, or naming another path, gets none.
func TestMountWarnings(t *testing.T) {
	f, err := Load("t.yaml", yml(`
name: m
params:
  mp: [/mnt/fuse]
server: {kind: passthrough, backing: /tmp/b, mountpoint: "${mp}/"}
workloads:
  - name: w
    pattern: create
    dir: /mnt/fuse/w
    jobs: 1
    files: 10
    prepare: rm -rf /mnt/fuse/w
checks:
  - name: bare
    run: test -e /mnt/fuse/f
  - {name: mounted, run: "test -e /mnt/fuse/f", mount: true}
  - {name: other, run: "ls /mnt/fuse2 /tmp/mnt/fuse /tmp/b"}
  - {name: whole, run: "grep -q fuse /proc/mounts && ls /mnt/fuse"}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range f.Warnings {
		got = append(got, w.Error())
	}
	want := []string{
		"t.yaml:11:14: workloads[0].prepare names /mnt/fuse, but it runs before the server is mounted: it would see the bare mountpoint directory; add prepare_mount: true",
		"t.yaml:14:10: checks[0].run names /mnt/fuse, but the check runs after the server is unmounted: it would see the bare mountpoint directory; add mount: true",
		"t.yaml:17:24: checks[3].run names /mnt/fuse, but the check runs after the server is unmounted: it would see the bare mountpoint directory; add mount: true",
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestNamesPath(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		want bool
	}{
		{"ls /mnt/fuse", true},
		{"ls /mnt/fuse/", true},
		{"ls /mnt/fuse/a/b", true},
		{"cd /mnt/fuse;ls", true},
		{`test -d "/mnt/fuse"`, true},
		{"fio --directory=/mnt/fuse", true},
		{"ls /mnt/fuse2", false},
		{"ls /mnt/fuse.old", false},
		{"ls /tmp/mnt/fuse", false},
		{"ls /tmp/mnt/fuse /mnt/fuse", true},
		{"", false},
	} {
		if got := namesPath(c.cmd, "/mnt/fuse"); got != c.want {
			t.Errorf("namesPath(%q) = %v, want %v", c.cmd, got, c.want)
		}
	}
}

// TestShippedNoMountWarnings: klab's own experiments have no warnings.
func TestShippedNoMountWarnings(t *testing.T) {
	for _, n := range Shipped() {
		f, err := Find(n)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range f.Warnings {
			t.Errorf("%s", w.Error())
		}
	}
}

// TestUserspaceCheckStep: a run check with userspace: true runs with bash
// chrooted into the userspace, inside the server's mount with mount: true.
func TestUserspaceCheckStep(t *testing.T) {
	f, err := Load("t.yaml", yml(`
name: m
server: {kind: passthrough, backing: /tmp/b, mountpoint: /mnt/fuse}
checks:
  - {name: c, run: "stat /mnt/fuse", mount: true, userspace: true}
  - {name: d, run: "true"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !needsUserspace(f.Spec) {
		t.Fatal("needsUserspace: false")
	}
	st := checkStep(f.Spec, &f.Spec.Checks[0])
	if st.Kind != proto.StepFUSE || st.FUSE.Then == nil {
		t.Fatalf("step %+v, want a fuse step", st)
	}
	if then := st.FUSE.Then; then.Root != "/klab/userspace" || !slices.Equal(then.Argv, []string{"bash", "-c", "stat /mnt/fuse"}) {
		t.Errorf("inner step root %q argv %q, want bash -c in /klab/userspace", then.Root, then.Argv)
	}
	if st := checkStep(f.Spec, &f.Spec.Checks[1]); st.Root != "" || st.Argv[0] != "sh" {
		t.Errorf("plain check: root %q argv %q", st.Root, st.Argv)
	}
}
