package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SysctlPath returns the file under root that holds the sysctl key. The key
// is in dotted form (fs.fuse.max_pages_limit) or, when it contains a slash,
// in slash form (net/ipv4/conf/eth0.100/forwarding, where dots stay). Keys
// that are empty, absolute, or have empty, "." or ".." segments are
// rejected.
func SysctlPath(root, key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("sysctl: empty key")
	}
	if strings.HasPrefix(key, "/") {
		return "", fmt.Errorf("sysctl %q: absolute key", key)
	}
	if strings.ContainsRune(key, 0) {
		return "", fmt.Errorf("sysctl %q: NUL byte in key", key)
	}
	sep := "."
	if strings.Contains(key, "/") {
		sep = "/"
	}
	segs := strings.Split(key, sep)
	for _, s := range segs {
		switch s {
		case "":
			return "", fmt.Errorf("sysctl %q: empty segment in key", key)
		case ".", "..":
			return "", fmt.Errorf("sysctl %q: %q segment in key", key, s)
		}
	}
	return filepath.Join(append([]string{root}, segs...)...), nil
}

// WriteSysctl writes value to the sysctl key under root (normally
// /proc/sys) in one write(2), without adding a newline, like
// `echo -n value > file`. The file must exist.
func WriteSysctl(root, key, value string) error {
	p, err := SysctlPath(root, key)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return fmt.Errorf("sysctl %q: no such key (%s): %w", key, p, err)
		}
		return fmt.Errorf("sysctl %q: %w", key, err)
	}
	// With a newline, as sysctl -w writes it: some keys (printk_devkmsg)
	// refuse a value without one.
	line := value
	if !strings.HasSuffix(line, "\n") {
		line += "\n"
	}
	_, werr := f.Write([]byte(line))
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("sysctl %q = %q: %w", key, value, werr)
	}
	if cerr != nil {
		return fmt.Errorf("sysctl %q = %q: %w", key, value, cerr)
	}
	return nil
}
