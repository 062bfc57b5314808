package experiments

import (
	"io"

	"klab/results"
)

func ioLimit(r io.Reader, n int64) io.Reader { return io.LimitReader(r, n) }

func writeAtomic(path string, data []byte) error { return results.WriteFileAtomic(path, data, 0o644) }
