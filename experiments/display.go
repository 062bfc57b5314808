package experiments

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// display shows a run's progress: on a terminal, one bar (units done,
// the current unit, time elapsed and left) with the log lines above it;
// elsewhere, plain lines.
type display struct {
	out io.Writer
	p   *mpb.Progress
	bar *mpb.Bar

	mu      sync.Mutex // guards current and buf
	current string
	buf     []byte
}

func newDisplay(out io.Writer, terminal bool, total int) *display {
	d := &display{out: out}
	if out == nil {
		d.out = io.Discard
		return d
	}
	if !terminal || total == 0 {
		return d
	}
	d.p = mpb.New(mpb.WithOutput(out), mpb.WithWidth(30))
	d.bar = d.p.AddBar(int64(total),
		mpb.PrependDecorators(
			decor.CountersNoUnit("%d/%d units ", decor.WCSyncWidth),
			decor.Any(func(decor.Statistics) string {
				d.mu.Lock()
				defer d.mu.Unlock()
				return d.current
			}),
		),
		mpb.AppendDecorators(
			decor.Elapsed(decor.ET_STYLE_MMSS),
			decor.Name(" elapsed, "),
			decor.OnComplete(decor.AverageETA(decor.ET_STYLE_MMSS), "done"),
			decor.OnComplete(decor.Name(" left"), ""),
		),
	)
	return d
}

// Write takes whole lines and prints them (above the bar on a terminal).
func (d *display) Write(b []byte) (int, error) {
	if d.p == nil {
		return d.out.Write(b)
	}
	d.mu.Lock()
	d.buf = append(d.buf, b...)
	var lines []byte
	if i := bytes.LastIndexByte(d.buf, '\n'); i >= 0 {
		lines = append(lines, d.buf[:i+1]...)
		d.buf = d.buf[i+1:]
	}
	d.mu.Unlock()
	if len(lines) > 0 {
		if _, err := d.p.Write(lines); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

func (d *display) printf(format string, args ...any) {
	fmt.Fprintf(d, format+"\n", args...)
}

// unit names the unit now running.
func (d *display) unit(s string) {
	d.mu.Lock()
	d.current = s
	d.mu.Unlock()
}

// advance counts n units as done.
func (d *display) advance(n int) {
	if d.bar != nil {
		d.bar.IncrBy(n)
	}
}

// grow makes the bar's total units total (a run that adds rounds).
func (d *display) grow(total int) {
	if d.bar != nil {
		d.bar.SetTotal(int64(total), false)
	}
}

// close ends the bar, complete or not.
func (d *display) close() {
	if d.p == nil {
		return
	}
	if !d.bar.Completed() {
		d.bar.Abort(false)
	}
	d.p.Wait()
}
