package debian

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"klab/images/apt"
	"klab/images/kerneldir"
	"klab/internal/proc"
	"klab/internal/units"
	"klab/results"
)

// installDebian downloads and unpacks pick into out, the entry that
// becomes final; tmp is scratch space.
func installDebian(ctx context.Context, env *apt.Env, tmp, out, final string, pick *debianPick, o *Options) error {
	debs, root := filepath.Join(tmp, "debs"), filepath.Join(tmp, "root")
	for _, d := range []string{debs, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("debian kernel cache: %w", err)
		}
	}
	start := time.Now()
	var files []string
	for _, p := range pick.pkgs {
		o.Logf("downloading %s %s (%s)...", p.Name, p.Version, humanSize(p.Size))
		if err := env.Download(ctx, 30*time.Minute, debs, "-q", "download", p.Name+"="+p.Version); err != nil {
			return pick.ref.unavailable(ctx, fmt.Errorf("downloading %s: %w", p.Name, err))
		}
		m, _ := filepath.Glob(filepath.Join(debs, GlobEscape(p.Name)+"_*.deb"))
		if len(m) != 1 {
			return fmt.Errorf("downloading %s: apt-get download left %d matching .deb files in %s", p.Name, len(m), debs)
		}
		files = append(files, m[0])
	}
	o.Logf("downloaded in %.1fs; unpacking...", time.Since(start).Seconds())
	for _, f := range files {
		if _, err := proc.Run(ctx, proc.Opts{Timeout: 10 * time.Minute}, "dpkg-deb", "-x", f, root); err != nil {
			return fmt.Errorf("unpacking %s: %w", filepath.Base(f), err)
		}
	}
	if err := layoutKernel(root, out, pick.release); err != nil {
		return fmt.Errorf("%s %s: %w", pick.image.Name, pick.image.Version, err)
	}
	image := filepath.Join(out, "vmlinuz")
	kver, err := kerneldir.CheckBzImage(image)
	if err != nil {
		return err
	}
	if kver == "" {
		kver = pick.release
	} else if kver != pick.release {
		o.Logf("note: %s reports kernel release %s, not %s", pick.image.Name, kver, pick.release)
	}
	id, err := kerneldir.ID(image, filepath.Join(out, "config"))
	if err != nil {
		return err
	}
	k := &results.Kernel{
		Name:           "debian:" + pick.release,
		ID:             id,
		Version:        kver,
		Source:         "debian",
		Package:        pick.image.Name,
		PackageVersion: pick.image.Version,
		Suite:          pick.suite,
		Image:          filepath.Join(final, "vmlinuz"),
	}
	if _, err := os.Stat(filepath.Join(out, "config")); err == nil {
		k.Config = filepath.Join(final, "config")
	}
	if _, err := os.Stat(filepath.Join(out, "modules")); err == nil {
		k.Modules = filepath.Join(final, "modules")
	}
	var lacks []string
	if k.Config == "" {
		lacks = append(lacks, "no kernel config")
	}
	if k.Modules == "" {
		lacks = append(lacks, "no modules")
	}
	if len(lacks) > 0 {
		o.Logf("warning: %s %s has %s", pick.image.Name, pick.image.Version, strings.Join(lacks, " and "))
	}
	if err := kerneldir.Write(out, k); err != nil {
		return err
	}
	o.Logf("unpacked %s %s in %.1fs", pick.image.Name, pick.image.Version, time.Since(start).Seconds())
	return nil
}

// layoutKernel moves the files of an unpacked kernel package tree (root)
// into out: vmlinuz, config and modules/. Both the old layout
// (boot/vmlinuz-<release>, lib/modules/<release>) and the 7.x one
// (usr/lib/modules/<release>/{vmlinuz,config}) are understood.
func layoutKernel(root, out, release string) error {
	var modDirs []string
	for _, d := range []string{"usr/lib/modules", "lib/modules"} {
		p := filepath.Join(root, d, release)
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			modDirs = append(modDirs, p)
		}
	}
	if len(modDirs) == 0 {
		// The release in the package name should match the directory;
		// accept a single other directory.
		for _, d := range []string{"usr/lib/modules", "lib/modules"} {
			m, _ := filepath.Glob(filepath.Join(root, d, "*"))
			modDirs = append(modDirs, m...)
		}
		if len(modDirs) > 1 {
			return fmt.Errorf("several module directories and none named %s: %s", release, strings.Join(modDirs, " "))
		}
	}
	mods := ""
	if len(modDirs) > 0 {
		mods = modDirs[0]
		for _, other := range modDirs[1:] {
			if err := mergeDir(other, mods); err != nil {
				return err
			}
		}
	}
	find := func(names ...string) string {
		for _, n := range names {
			if n == "" {
				continue
			}
			if fi, err := os.Lstat(n); err == nil && fi.Mode().IsRegular() {
				return n
			}
		}
		return ""
	}
	modFile := func(n string) string {
		if mods == "" {
			return ""
		}
		return filepath.Join(mods, n)
	}
	vmlinuz := find(filepath.Join(root, "boot", "vmlinuz-"+release), modFile("vmlinuz"))
	if vmlinuz == "" {
		return fmt.Errorf("no kernel image: neither boot/vmlinuz-%s nor usr/lib/modules/%s/vmlinuz in the packages", release, release)
	}
	if err := os.Rename(vmlinuz, filepath.Join(out, "vmlinuz")); err != nil {
		return err
	}
	if config := find(filepath.Join(root, "boot", "config-"+release), modFile("config")); config != "" {
		if err := os.Rename(config, filepath.Join(out, "config")); err != nil {
			return err
		}
	}
	if mods != "" {
		if des, err := os.ReadDir(mods); err != nil || len(des) == 0 {
			return err // nothing but vmlinuz: no modules directory
		}
		if err := os.Rename(mods, filepath.Join(out, "modules")); err != nil {
			return err
		}
	}
	return nil
}

// mergeDir moves the entries of src into dst, keeping dst's on conflict
// and merging subdirectories.
func mergeDir(src, dst string) error {
	des, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, de := range des {
		s, d := filepath.Join(src, de.Name()), filepath.Join(dst, de.Name())
		fi, err := os.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Rename(s, d); err != nil {
				return err
			}
		case err != nil:
			return err
		case fi.IsDir() && de.IsDir():
			if err := mergeDir(s, d); err != nil {
				return err
			}
		}
	}
	return nil
}

func humanSize(n int64) string {
	if n <= 0 {
		return "size unknown"
	}
	return units.Bytes(n)
}

// globEscape escapes the glob metacharacters of a package name.
func GlobEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
