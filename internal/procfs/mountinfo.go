package procfs

import (
	"strconv"
	"strings"
)

// UnescapeMountinfo undoes the kernel's \ooo escaping of spaces, tabs,
// newlines and backslashes in the paths of /proc/self/mountinfo (\040 for
// a space). A backslash not followed by three octal digits stays.
func UnescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
