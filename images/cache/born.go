package cache

import (
	"time"

	"golang.org/x/sys/unix"
)

// birthTime is when the file at p was made, when the file system keeps
// it (statx's btime); zero otherwise.
func birthTime(p string) time.Time {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &st); err != nil || st.Mask&unix.STATX_BTIME == 0 {
		return time.Time{}
	}
	return time.Unix(st.Btime.Sec, int64(st.Btime.Nsec))
}
