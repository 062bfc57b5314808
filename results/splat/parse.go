package splat

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// readChunk is how much ParseReader reads at a time.
const readChunk = 64 << 10

// ParseReader reads a console log from r to its end and calls f with each
// report, complete, in console order (as OnDone does). Logs of any size
// are streamed: memory use is bounded by the scanner's limits, not by the
// log. It stops at the first error of r or f, or when ctx is done, and
// returns it wrapped.
func ParseReader(ctx context.Context, r io.Reader, f func(Report) error) error {
	s := NewScanner()
	var ferr error
	s.OnDone(func(rep Report) {
		if ferr == nil {
			ferr = f(rep)
		}
	})
	buf := make([]byte, readChunk)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("parse console log: %w", err)
		}
		n, err := r.Read(buf)
		if n > 0 {
			s.Write(buf[:n])
		}
		if ferr != nil {
			return fmt.Errorf("parse console log: %w", ferr)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read console log: %w", err)
		}
	}
	s.Close()
	if ferr != nil {
		return fmt.Errorf("parse console log: %w", ferr)
	}
	return nil
}
