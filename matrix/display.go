package matrix

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// display shows a matrix's progress: on a terminal, a line per running
// cell (its kernel, experiment and time elapsed) under an overall bar
// with the time left; elsewhere, a plain line per cell started and ended.
type display struct {
	out   io.Writer
	p     *mpb.Progress
	total *mpb.Bar

	mu      sync.Mutex
	running map[string]*mpb.Bar
	done_   int
	all     int
}

func newDisplay(out io.Writer, terminal bool, all, done int) *display {
	d := &display{out: out, running: map[string]*mpb.Bar{}, done_: done, all: all}
	if out == nil {
		d.out = io.Discard
		return d
	}
	if !terminal {
		return d
	}
	d.p = mpb.New(mpb.WithOutput(out), mpb.WithWidth(30))
	d.total = d.p.AddBar(int64(all),
		mpb.PrependDecorators(decor.CountersNoUnit("%d/%d cells ", decor.WCSyncWidth)),
		mpb.AppendDecorators(
			decor.Elapsed(decor.ET_STYLE_MMSS),
			decor.Name(" elapsed, "),
			decor.OnComplete(decor.AverageETA(decor.ET_STYLE_MMSS), "done"),
			decor.OnComplete(decor.Name(" left"), ""),
		),
	)
	d.total.SetCurrent(int64(done))
	return d
}

// start shows c as running.
func (d *display) start(c Cell) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.p == nil {
		fmt.Fprintf(d.out, "klab: cell %s: started\n", c.Name())
		return
	}
	d.running[c.ID] = d.p.New(0, mpb.NopStyle(),
		mpb.PrependDecorators(decor.Name("  "+c.Kernel+"  "+c.Experiment+"  ")),
		mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_MMSS)),
		mpb.BarRemoveOnComplete(),
	)
}

// done shows c's end.
func (d *display) done(c Cell, r *CellResult) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r.Status != StatusIncomplete {
		d.done_++
	}
	took := r.End.Sub(r.Start).Round(time.Second)
	line := fmt.Sprintf("klab: cell %s: %s in %s (%d/%d)", c.Name(), r.Status, took, d.done_, d.all)
	if r.Message != "" {
		line += ": " + firstLine(r.Message)
	}
	if d.p == nil {
		fmt.Fprintln(d.out, line)
		return
	}
	if b := d.running[c.ID]; b != nil {
		b.Abort(true)
		delete(d.running, c.ID)
	}
	fmt.Fprintln(d.p, line)
	if r.Status != StatusIncomplete {
		d.total.Increment()
	}
}

// close ends the bars.
func (d *display) close() {
	if d.p == nil {
		return
	}
	d.mu.Lock()
	for id, b := range d.running {
		b.Abort(true)
		delete(d.running, id)
	}
	d.mu.Unlock()
	if !d.total.Completed() {
		d.total.Abort(false)
	}
	d.p.Wait()
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}
