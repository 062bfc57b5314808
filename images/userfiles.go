package images

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"klab/internal/option"
)

// UserPath is one of the user's own files or trees for the guest
// (klab boot --file HOST[:GUEST], --dir HOST[:GUEST]).
type UserPath struct {
	// Host is the file or directory on the host.
	Host string
	// Guest is where it goes in the guest, absolute.
	Guest string
	// Dir is true for a tree (--dir).
	Dir bool
}

// UserWorkDir is where the user's files go when no guest path is given,
// and where the guest command then runs: `--file ./t -- ./t` works.
const UserWorkDir = "/work"

// MaxUserFiles bounds what --file and --dir add to an initramfs, which
// the guest holds in memory.
const MaxUserFiles = 512 << 20

// ParseUserPath parses a file's (a tree's, with dir) HOST, or HOST:GUEST
// with GUEST absolute. Without GUEST the file or tree goes to
// UserWorkDir/<base name of HOST>. Its errors are *option.Error of the
// option file, or dir.
func ParseUserPath(v string, dir bool) (UserPath, error) {
	name := userPathOption(dir)
	host, guest, found := strings.Cut(v, ":")
	if host == "" {
		return UserPath{}, option.Errorf(name, "%q: want HOST or HOST:GUEST, e.g. ./tools/testing/selftests/x/test:/root/test", v)
	}
	if !found || guest == "" {
		guest = UserWorkDir + "/" + filepath.Base(filepath.Clean(host))
	}
	if !strings.HasPrefix(guest, "/") {
		return UserPath{}, option.Errorf(name, "%q: the guest path %q must be absolute", v, guest)
	}
	guest = filepath.Clean(guest)
	if guest == "/" || ownGuestPath(guest) {
		return UserPath{}, option.Errorf(name, "%q: %s is klab's own in the guest; choose another guest path", v, guest)
	}
	fi, err := os.Stat(host)
	if err != nil {
		return UserPath{}, option.Errorf(name, "%q: %w", v, err)
	}
	switch {
	case dir && !fi.IsDir():
		return UserPath{}, option.Errorf(name, "%q: %s is not a directory but a file, which goes in as one", v, host)
	case !dir && fi.IsDir():
		return UserPath{}, option.Errorf(name, "%q: %s is not a regular file but a directory, which goes in as a tree", v, host)
	case !dir && !fi.Mode().IsRegular():
		return UserPath{}, option.Errorf(name, "%q: %s is not a regular file", v, host)
	}
	return UserPath{Host: host, Guest: guest, Dir: dir}, nil
}

// userPathOption is the option of a UserPath in errors: a file, or a
// tree (dir).
func userPathOption(dir bool) string {
	if dir {
		return "dir"
	}
	return "file"
}

// ownGuestPath reports whether p is one of the paths klab's initramfs
// needs as they are.
func ownGuestPath(p string) bool {
	for _, own := range []string{"/init", "/bin/klab-agent", "/bin/uinit", "/bbin", "/lib/klab", "/proc", "/sys", "/dev"} {
		if p == own || strings.HasPrefix(p, own+"/") {
			return true
		}
	}
	return false
}

// UserFiles returns the overlay files for the user's paths: each file at
// its guest path with its mode, and for each dynamically linked ELF
// program the shared libraries it needs, found as HostProgram finds them.
func UserFiles(paths []UserPath) ([]ExtraFile, error) {
	var out []ExtraFile
	var total int64
	add := func(host, guest string) error {
		fi, err := os.Stat(host)
		if err != nil {
			return err
		}
		total += fi.Size()
		if total > MaxUserFiles {
			return fmt.Errorf("%s: the files for the guest pass %d MiB; the initramfs lives in guest memory, so keep big trees out of it", host, MaxUserFiles>>20)
		}
		dynamic, err := isDynamicELF(host)
		if err != nil {
			return err
		}
		if !dynamic {
			out = append(out, ExtraFile{Source: host, Dest: guest, Mode: fi.Mode().Perm()})
			return nil
		}
		abs, err := filepath.Abs(host)
		if err != nil {
			return err
		}
		files, err := HostProgram(abs, LibSearch{})
		if err != nil {
			return err
		}
		for _, f := range files {
			if f.Source == abs && f.Dest == "/usr/bin/"+filepath.Base(abs) {
				f.Dest, f.Mode = guest, fi.Mode().Perm()
			}
			out = append(out, f)
		}
		return nil
	}
	for _, p := range paths {
		if !p.Dir {
			if err := add(p.Host, p.Guest); err != nil {
				return nil, option.Errorf(userPathOption(false), "%s: %w", p.Host, err)
			}
			continue
		}
		err := filepath.WalkDir(p.Host, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			rel, err := filepath.Rel(p.Host, path)
			if err != nil {
				return err
			}
			if d.Type()&fs.ModeSymlink != 0 {
				// A link to a file brings the file's content; links to
				// directories are not followed (no loops, no escapes).
				if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
					return nil
				}
			} else if !d.Type().IsRegular() {
				return nil
			}
			return add(path, filepath.Join(p.Guest, rel))
		})
		if err != nil {
			return nil, option.Errorf(userPathOption(true), "%s: %w", p.Host, err)
		}
	}
	// One file per guest path: the last flag wins, and a library two
	// programs share is added once.
	seen := map[string]int{}
	var dedup []ExtraFile
	for _, f := range out {
		if i, ok := seen[f.Dest]; ok {
			dedup[i] = f
			continue
		}
		seen[f.Dest] = len(dedup)
		dedup = append(dedup, f)
	}
	sort.SliceStable(dedup, func(i, j int) bool { return dedup[i].Dest < dedup[j].Dest })
	return dedup, nil
}

// isDynamicELF reports whether path is an ELF object with an interpreter
// (a dynamically linked program).
func isDynamicELF(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return false, nil
		}
		return false, err
	}
	if !bytes.Equal(magic[:], []byte(elf.ELFMAG)) {
		return false, nil
	}
	e, err := elf.NewFile(f)
	if err != nil {
		return false, nil // not an ELF we can read: copied as it is
	}
	defer e.Close()
	for _, p := range e.Progs {
		if p.Type == elf.PT_INTERP {
			return true, nil
		}
	}
	return false, nil
}
