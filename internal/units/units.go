// Package units formats and parses byte counts, in one unit system for
// all of klab's input and output: binary prefixes (KiB, MiB, GiB, TiB),
// as the kernel and QEMU use for memory. Every size klab reads (flags,
// experiment and matrix files) goes through ParseSize or ParseMiB.
package units

import "fmt"

// Bytes formats n bytes as "512 B", "1.5 KiB", "2.0 MiB", "20.0 GiB" or
// "1.2 TiB".
func Bytes(n int64) string {
	if n < 1<<10 && n > -(1<<10) {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB"} {
		v /= 1 << 10
		if v < 1<<10 && v > -(1<<10) {
			return fmt.Sprintf("%.1f %s", v, u)
		}
	}
	return fmt.Sprintf("%.1f TiB", v/(1<<10))
}
