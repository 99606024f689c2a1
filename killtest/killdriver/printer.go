package killdriver

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// Printer shows a kill driver's notes and progress on w: a progress
// bar when w is a terminal, and otherwise a plain line every tenth of the
// runs (and at most every few seconds), so that a log stays readable.
// A printer from NewSplitPrinter draws its bar on another writer.
type Printer struct {
	w        io.Writer
	barW     io.Writer // where the bar goes, when it is a terminal
	bar      *bar
	label    string
	tty      bool
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
	p := &Printer{w: w, barW: bar, label: label, lastLine: time.Now()}
	if f, ok := bar.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
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
	if p.tty {
		if p.bar == nil {
			p.bar = &bar{w: p.barW, total: k.Total, start: time.Now()}
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
// place, "DESC [=====     ] DONE/TOTAL, about 40s left". (It was
// schollz/progressbar, whose package init, and net/http's that it brings,
// cost every run of the kv command most of a millisecond.)
type bar struct {
	w           io.Writer
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
	const width = 30
	total := max(b.total, 1)
	filled := min(width*b.done/total, width)
	line := fmt.Sprintf("%s [%s%s] %d/%d", b.desc, strings.Repeat("=", filled), strings.Repeat(" ", width-filled), b.done, b.total)
	if b.done > 0 && b.done < b.total {
		left := time.Since(b.start) * time.Duration(b.total-b.done) / time.Duration(b.done)
		line += fmt.Sprintf(", about %v left", left.Round(time.Second))
	}
	fmt.Fprintf(b.w, "\r\033[K%s", line)
	b.drawn = time.Now()
}

// clear removes the line.
func (b *bar) clear() { fmt.Fprint(b.w, "\r\033[K") }
