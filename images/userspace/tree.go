package userspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"klab/guest/proto"
	"klab/images/apt"
	"klab/images/internal/ext4img"
	"klab/internal/proc"
)

// build downloads and unpacks d.Packages into a tree under tmp, makes it
// a userspace and packs it into out: the image and its descriptor.
func build(ctx context.Context, env *apt.Env, tmp, out string, d Descriptor, o *Options) error {
	debs, tree := filepath.Join(tmp, "debs"), filepath.Join(tmp, "tree")
	for _, dir := range []string{debs, tree} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("userspace: %w", err)
		}
	}
	start := time.Now()
	files, err := download(ctx, env, debs, d.Packages)
	if err != nil {
		return err
	}
	o.logf("downloaded %d packages in %.1fs; unpacking...", len(files), time.Since(start).Seconds())
	return assemble(ctx, files, tree, out, d, o)
}

// assemble unpacks the .deb files into tree, an empty directory, makes it
// a userspace and packs it into out: the image and d, completed, as its
// descriptor.
func assemble(ctx context.Context, files []string, tree, out string, d Descriptor, o *Options) error {
	t := time.Now()
	var postinsts []string
	control := filepath.Join(tree, "DEBIAN")
	for _, f := range files {
		// -R unpacks the files and, into DEBIAN/, the control files; a
		// postinst is kept for its update-alternatives calls.
		if _, err := proc.Run(ctx, proc.Opts{Timeout: 5 * time.Minute}, "dpkg-deb", "-R", f, tree); err != nil {
			return fmt.Errorf("unpacking %s: %w", filepath.Base(f), err)
		}
		if data, err := os.ReadFile(filepath.Join(control, "postinst")); err == nil {
			postinsts = append(postinsts, string(data))
		}
		if err := os.RemoveAll(control); err != nil {
			return fmt.Errorf("userspace: %w", err)
		}
	}
	o.logf("unpacked in %.1fs", time.Since(t).Seconds())
	if err := setup(tree, postinsts); err != nil {
		return fmt.Errorf("userspace: %w", err)
	}
	d.Users = userNames()
	libs, err := sonames(tree)
	if err != nil {
		return fmt.Errorf("userspace: %w", err)
	}
	d.Libs = libs
	st, err := ext4img.Measure(tree)
	if err != nil {
		return fmt.Errorf("userspace: %w", err)
	}
	d.TreeBytes, d.Files = st.Bytes, st.Files
	t = time.Now()
	img := filepath.Join(out, imageFile)
	if err := makeExt4(ctx, tree, img, st); err != nil {
		return err
	}
	fi, err := os.Stat(img)
	if err != nil {
		return fmt.Errorf("userspace: %w", err)
	}
	d.ImageBytes = fi.Size()
	d.Built = time.Now().UTC().Truncate(time.Second)
	o.logf("made a %d MiB ext4 image of %d files (%d MiB) in %.1fs",
		d.ImageBytes>>20, d.Files, d.TreeBytes>>20, time.Since(t).Seconds())
	return writeDescriptor(out, &d)
}

// download fetches pkgs into dir with one apt-get download (apt checks
// each file against the signed index) and returns their paths, in the
// order of pkgs.
func download(ctx context.Context, env *apt.Env, dir string, pkgs []Package) ([]string, error) {
	args := []string{"-q", "download"}
	for _, p := range pkgs {
		args = append(args, p.Name+"="+p.Version)
	}
	if err := env.Download(ctx, 30*time.Minute, dir, args...); err != nil {
		return nil, fmt.Errorf("downloading the userspace packages: %w", err)
	}
	var files []string
	for _, p := range pkgs {
		f := filepath.Join(dir, debFileName(p))
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("downloading %s %s: apt-get download left no %s", p.Name, p.Version, filepath.Base(f))
		}
		files = append(files, f)
	}
	return files, nil
}

// debFileName is the name apt-get download gives a package's file: the
// epoch's colon is written %3a.
func debFileName(p Package) string {
	return p.Name + "_" + strings.ReplaceAll(p.Version, ":", "%3a") + "_" + p.Arch + ".deb"
}

// pruned are the directories dropped from the tree: documentation, manual
// pages and translations, which no test suite reads.
var pruned = []string{
	"usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale",
	"usr/share/lintian", "usr/share/bug", "usr/share/doc-base",
}

// mountPoints are the directories the agent mounts on in the guest
// (guest/agent: StepUserspace), and the ones a read-only tree must have
// for the writable tmpfs mounts.
var mountPoints = []string{"proc", "sys", "dev", "tmp", "var/tmp", "run", "mnt", "root", "home", "var/log", "var/lib"}

// setup turns an unpacked tree into a usable root without maintainer
// scripts: documentation dropped, the links update-alternatives would
// make (awk, pager), /bin/sh, the accounts test suites expect, the few
// /etc files a base system has, and the mount points.
func setup(tree string, postinsts []string) error {
	for _, p := range pruned {
		if err := os.RemoveAll(filepath.Join(tree, p)); err != nil {
			return err
		}
	}
	for _, a := range pickAlternatives(postinsts) {
		if err := linkIfMissing(tree, a.link, a.path); err != nil {
			return err
		}
	}
	// Debian renamed libaio's soname with the 64-bit time_t transition
	// (trixie's libaio.so.1t64); on 64-bit machines the ABI did not
	// change, so programs built on older hosts (fstests' fsstress, fsx)
	// find the library under its old name too.
	for _, l := range t64Compat {
		if exists(tree, l.path) && !exists(tree, l.link) {
			if err := linkIfMissing(tree, l.link, l.path); err != nil {
				return err
			}
		}
	}
	for _, sh := range []string{"/usr/bin/dash", "/usr/bin/bash"} {
		if exists(tree, sh) {
			if err := linkIfMissing(tree, "/usr/bin/sh", sh); err != nil {
				return err
			}
			break
		}
	}
	for _, m := range mountPoints {
		if err := os.MkdirAll(inTree(tree, "/"+m), 0o755); err != nil {
			return err
		}
	}
	for _, m := range []string{"tmp", "var/tmp"} {
		if err := os.Chmod(inTree(tree, "/"+m), 0o1777|fs.ModeSticky); err != nil {
			return err
		}
	}
	if err := os.Chmod(inTree(tree, "/root"), 0o700); err != nil {
		return err
	}
	if err := linkMountHelpers(tree); err != nil {
		return err
	}
	return writeEtc(tree)
}

// linkMountHelpers links /usr/sbin/mount.fuse.NAME, for each fstests FUSE
// server, to the helper the agent puts into the writable
// proto.FstestsHelperDir at run time: mount(8) looks for helpers in /sbin
// only, which is read-only. A link costs nothing at mount time, where a
// script that execs the helper would add a shell's start to every mount.
func linkMountHelpers(tree string) error {
	if err := os.MkdirAll(inTree(tree, "/usr/sbin"), 0o755); err != nil {
		return err
	}
	sbin := treeFile(tree, "/usr/sbin/x")
	if sbin == "" {
		return errors.New("no /usr/sbin in the tree for the mount helpers")
	}
	for _, s := range proto.FstestsFUSEServers() {
		name := proto.FstestsMountHelper(s)
		link := filepath.Join(filepath.Dir(sbin), name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(path.Join(proto.FstestsHelperDir, name), link); err != nil {
			return err
		}
	}
	return nil
}

// inTree is the host path of the tree's absolute path p.
func inTree(tree, p string) string { return filepath.Join(tree, filepath.FromSlash(p)) }

// exists reports whether the tree has p, following no links.
func exists(tree, p string) bool {
	_, err := os.Lstat(inTree(tree, p))
	return err == nil
}

// linkIfMissing makes the tree's link point to target (both absolute
// paths in the tree), unless link exists, its directory does not, or
// target does not.
func linkIfMissing(tree, link, target string) error {
	if !strings.HasPrefix(link, "/") || !strings.HasPrefix(target, "/") || resolveInTree(tree, target) == "" {
		return nil
	}
	host := treeFile(tree, link)
	if host == "" {
		return nil
	}
	if _, err := os.Lstat(host); err == nil {
		return nil
	}
	return os.Symlink(target, host)
}

// treeFile is the host path of the tree's file p, its directory resolved
// inside the tree (so that a link on the way, even an absolute one, never
// leads out of it), or "" when that directory does not exist.
func treeFile(tree, p string) string {
	dir := resolveInTree(tree, path.Dir(p))
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, path.Base(p))
}

// resolveInTree returns the host path that the tree's absolute path p
// names, following links inside the tree (an absolute link target is the
// tree's), or "" when there is none.
func resolveInTree(tree, p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	cur := "/"
	for hops := 0; len(parts) > 0; {
		next := filepath.Join(cur, parts[0])
		parts = parts[1:]
		fi, err := os.Lstat(inTree(tree, next))
		if err != nil {
			return ""
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return ""
		}
		target, err := os.Readlink(inTree(tree, next))
		if err != nil {
			return ""
		}
		if !strings.HasPrefix(target, "/") {
			target = filepath.Join(cur, target)
		}
		parts = append(strings.Split(strings.Trim(filepath.Clean(target), "/"), "/"), parts...)
		cur = "/"
	}
	return inTree(tree, cur)
}

// alternative is one link update-alternatives would make.
type alternative struct {
	name, link, path string
	priority         int
	// master is the path of the choice a slave link belongs to.
	master string
}

// pickAlternatives reads the update-alternatives --install (and --slave)
// calls of maintainer scripts and returns, for each alternative name, the
// links of its highest priority choice, sorted by link. Scripts are only
// read, never run.
func pickAlternatives(scripts []string) []alternative {
	best := map[string]alternative{}
	var slaves []alternative
	for _, script := range scripts {
		for _, cmd := range shellCommands(script) {
			f := strings.Fields(cmd)
			i := slices.Index(f, "update-alternatives")
			if i < 0 {
				continue
			}
			f = f[i+1:]
			var master alternative
			for j := 0; j < len(f); j++ {
				switch {
				case f[j] == "--install" && j+4 < len(f):
					prio, err := strconv.Atoi(f[j+4])
					if err != nil {
						continue
					}
					master = alternative{link: f[j+1], name: f[j+2], path: f[j+3], priority: prio}
					if b, ok := best[master.name]; !ok || prio > b.priority {
						best[master.name] = master
					}
					j += 4
				case f[j] == "--slave" && master.name != "" && j+3 < len(f):
					slaves = append(slaves, alternative{link: f[j+1], name: f[j+2], path: f[j+3], master: master.path})
					j += 3
				}
			}
		}
	}
	var out []alternative
	for _, a := range best {
		out = append(out, a)
		for _, s := range slaves {
			if s.master == a.path {
				out = append(out, s)
			}
		}
	}
	slices.SortFunc(out, func(a, b alternative) int { return strings.Compare(a.link, b.link) })
	return out
}

// shellCommands splits a shell script into logical lines: continuation
// backslashes joined, comments dropped.
func shellCommands(script string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(script, "\n") {
		t := strings.TrimSpace(line)
		if cur.Len() == 0 && strings.HasPrefix(t, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(t, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(t)
		out = append(out, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// makeExt4 packs tree, whose content st measured, into a new ext4 image
// at img (see ext4img.Make).
func makeExt4(ctx context.Context, tree, img string, st ext4img.Stats) error {
	if err := ext4img.Make(ctx, tree, img, "klab-userspace", st); err != nil {
		return fmt.Errorf("making the userspace image (mke2fs from e2fsprogs 1.43 or newer): %w", err)
	}
	return nil
}

// t64Compat are links from libraries' pre-t64 sonames to their t64 ones.
var t64Compat = []struct{ link, path string }{
	{"/usr/lib/x86_64-linux-gnu/libaio.so.1", "/usr/lib/x86_64-linux-gnu/libaio.so.1t64"},
}

// libDirs are the directories of a Debian tree that the dynamic loader
// searches by default (merged /usr: /lib is a link into /usr).
var libDirs = []string{"usr/lib/x86_64-linux-gnu", "usr/lib", "usr/lib64"}

// sonames returns the names in tree's library directories that look like
// a shared library's soname (libNAME.so.N...), sorted and unique.
func sonames(tree string) ([]string, error) {
	var out []string
	for _, d := range libDirs {
		entries, err := os.ReadDir(filepath.Join(tree, d))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if n := e.Name(); strings.HasPrefix(n, "lib") && strings.Contains(n, ".so.") && !e.IsDir() {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// MissingLibs returns the sonames of libs that d's image lacks, leaving
// out the C library's own (libc, libm, ld-linux: every image has them).
// An image whose descriptor predates Libs lacks nothing it can tell.
func (d *Descriptor) MissingLibs(libs []string) []string {
	if len(d.Libs) == 0 {
		return nil
	}
	var out []string
	for _, l := range libs {
		if strings.HasPrefix(l, "libc.so.") || strings.HasPrefix(l, "libm.so.") || strings.HasPrefix(l, "ld-linux") {
			continue
		}
		if _, found := slices.BinarySearch(d.Libs, l); !found {
			out = append(out, l)
		}
	}
	return out
}
