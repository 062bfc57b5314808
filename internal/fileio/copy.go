package fileio

import (
	"io"
	"os"
)

// CopyFile copies the regular file src to dst, made with perm. flag is
// added to os.O_WRONLY|os.O_CREATE: os.O_TRUNC replaces an existing dst,
// os.O_EXCL refuses one.
func CopyFile(src, dst string, perm os.FileMode, flag int) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|flag, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
