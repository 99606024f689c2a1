package killdriver

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Printer shows a kill driver's notes and progress on w: a progress
// bar when w is a terminal, and otherwise a plain line every tenth of the
// runs (and at most every few seconds), so that a log stays readable.
// A printer from NewSplitPrinter draws its bar on another writer.
type Printer struct {
	w        io.Writer
	barW     io.Writer // where the bar goes, when it is a terminal
	bar      *progressbar.ProgressBar
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
		p.bar.Clear()
	}
	fmt.Fprintln(p.w, s)
	if p.bar != nil {
		p.bar.RenderBlank()
	}
}

// Progress shows the state after a run.
func (p *Printer) Progress(k Progress) {
	desc := fmt.Sprintf("%s: %d killed, %d bad", p.label, k.Killed, k.Bad)
	if p.tty {
		if p.bar == nil {
			p.bar = progressbar.NewOptions(k.Total,
				progressbar.OptionSetWriter(p.barW),
				progressbar.OptionSetWidth(30),
				progressbar.OptionShowCount(),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionClearOnFinish(),
			)
		}
		p.bar.Describe(desc)
		p.bar.Set(k.Done)
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
		p.bar.Finish()
		p.bar.Clear()
		p.bar = nil
	}
}
