package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// IsTerminal reports whether w is a terminal: an *os.File whose
// descriptor is one.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Line is one line of progress on a terminal, redrawn in place. It is
// not safe for concurrent use: one goroutine draws it.
type Line struct {
	w     io.Writer
	drawn bool
}

// NewLine returns a Line on w when w is a terminal, and nil, which
// draws nothing, otherwise.
func NewLine(w io.Writer) *Line {
	if !IsTerminal(w) {
		return nil
	}
	return &Line{w: w}
}

// Draw replaces the line with s.
func (l *Line) Draw(s string) {
	if l == nil {
		return
	}
	l.drawn = true
	fmt.Fprintf(l.w, "\r\x1b[K%s", s)
}

// Drawn reports whether Draw was called since the last Clear.
func (l *Line) Drawn() bool { return l != nil && l.drawn }

// Clear empties the line, leaving the cursor at its start.
func (l *Line) Clear() {
	if l == nil {
		return
	}
	l.drawn = false
	fmt.Fprint(l.w, "\r\x1b[K")
}

// barWidth is the number of cells of Bar's bar.
const barWidth = 30

// Bar is the text of a progress bar: "DESC [=====     ] DONE/TOTAL",
// and while work remains, ", about 40s left", judged from the time
// since start.
func Bar(desc string, done, total int, start time.Time) string {
	filled := min(barWidth*done/max(total, 1), barWidth)
	filled = max(filled, 0)
	s := fmt.Sprintf("%s [%s%s] %d/%d", desc, strings.Repeat("=", filled), strings.Repeat(" ", barWidth-filled), done, total)
	if done > 0 && done < total {
		left := time.Since(start) * time.Duration(total-done) / time.Duration(done)
		s += fmt.Sprintf(", about %v left", left.Round(time.Second))
	}
	return s
}

// Size writes a byte count with a binary unit: "512 B", "1.5 KiB",
// "3.0 MiB", "1.2 GiB".
func Size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
