package killdriver

import (
	"fmt"
	"io"
	"time"

	"github.com/kvstore/kv/internal/progress"
)

// Printer shows a kill driver's notes and progress on w: a progress
// bar when w is a terminal, and otherwise a plain line every tenth of the
// runs (and at most every few seconds), so that a log stays readable.
// A printer from NewSplitPrinter draws its bar on another writer.
type Printer struct {
	w        io.Writer
	line     *progress.Line // where the bar goes: nil when not a terminal
	bar      *bar
	label    string
	lastLine time.Time
	lastDone int
}

// NewPrinter returns a printer for w; label names the runs ("recovery
// kills").
func NewPrinter(w io.Writer, label string) *Printer { return NewSplitPrinter(w, w, label) }

// NewSplitPrinter returns a printer of notes on w whose progress is a bar
// on bar when bar is a terminal (a command's stderr), and plain lines on
// w otherwise.
func NewSplitPrinter(w, bar io.Writer, label string) *Printer {
	return &Printer{w: w, line: progress.NewLine(bar), label: label, lastLine: time.Now()}
}

// Note prints a line, above the bar when there is one.
func (p *Printer) Note(s string) {
	if p.bar != nil {
		p.bar.clear()
	}
	fmt.Fprintln(p.w, s)
	if p.bar != nil {
		p.bar.render()
	}
}

// Progress shows the state after a run.
func (p *Printer) Progress(k Progress) {
	desc := fmt.Sprintf("%s: %d killed, %d bad", p.label, k.Killed, k.Bad)
	if p.line != nil {
		if p.bar == nil {
			p.bar = &bar{line: p.line, total: k.Total, start: time.Now()}
		}
		p.bar.desc = desc
		p.bar.set(k.Done)
		return
	}
	step := max(k.Total/10, 1)
	if k.Done == k.Total || k.Done-p.lastDone >= step || (time.Since(p.lastLine) > 5*time.Second && k.Done > p.lastDone) {
		fmt.Fprintf(p.w, "run %d/%d: %s\n", k.Done, k.Total, desc)
		p.lastLine, p.lastDone = time.Now(), k.Done
	}
}

// Done removes the bar, before the report is printed.
func (p *Printer) Done() {
	if p.bar != nil {
		p.bar.clear()
		p.bar = nil
	}
}

// bar is the progress bar drawn on a terminal: one line, redrawn in
// place, "DESC [=====     ] DONE/TOTAL, about 40s left", drawn by
// internal/progress as the kv command's progress lines are (see its doc
// for why no progress library).
type bar struct {
	line        *progress.Line
	desc        string
	done, total int
	start       time.Time
	drawn       time.Time
}

// set records done and redraws, at most ten times a second but always on
// the last run.
func (b *bar) set(done int) {
	b.done = done
	if done < b.total && time.Since(b.drawn) < 100*time.Millisecond {
		return
	}
	b.render()
}

// render draws the line.
func (b *bar) render() {
	b.line.Draw(progress.Bar(b.desc, b.done, b.total, b.start))
	b.drawn = time.Now()
}

// clear removes the line.
func (b *bar) clear() { b.line.Clear() }
