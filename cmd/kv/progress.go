package main

import (
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	draw "github.com/kvstore/kv/internal/progress"
	"github.com/kvstore/kv/vfs"
)

// progress is a one-line progress report on stderr, drawn only when
// stderr is a terminal (a log or a pipe gets nothing): what is done, of
// what total when it is known, the rate, and the time so far. It is
// redrawn ten times a second, and cleared by done. A nil *progress does
// nothing, so that a command calls it without asking whether there is a
// terminal. The drawing is internal/progress's, as the kill driver's.
type progress struct {
	line   *draw.Line
	label  string
	unit   string // "keys", "operations", or "" for bytes
	start  time.Time
	delay  time.Duration
	n      atomic.Int64
	total  atomic.Int64 // 0: unknown
	extra  atomic.Pointer[string]
	stop   chan struct{}
	wg     sync.WaitGroup
	closed bool
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool { return draw.IsTerminal(w) }

// newProgress starts a progress report on w when w is a terminal, and
// returns nil otherwise. Nothing is drawn before delay has passed, so
// that quick work leaves no trace.
func newProgress(w io.Writer, label, unit string, delay time.Duration) *progress {
	line := draw.NewLine(w)
	if line == nil {
		return nil
	}
	p := &progress{line: line, label: label, unit: unit, start: time.Now(), delay: delay, stop: make(chan struct{})}
	p.wg.Add(1)
	go p.loop()
	return p
}

func (p *progress) loop() {
	defer p.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			if time.Since(p.start) >= p.delay {
				p.draw()
			}
		}
	}
}

// add counts n more done.
func (p *progress) add(n int64) {
	if p != nil {
		p.n.Add(n)
	}
}

// setTotal says how much there is to do.
func (p *progress) setTotal(n int64) {
	if p != nil {
		p.total.Store(n)
	}
}

// note sets a few words shown after the counts.
func (p *progress) note(s string) {
	if p != nil {
		p.extra.Store(&s)
	}
}

func (p *progress) text() string {
	n, total := p.n.Load(), p.total.Load()
	el := time.Since(p.start)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", p.label, p.amount(n))
	if total > 0 {
		fmt.Fprintf(&b, " of %s (%d%%)", p.amount(total), min(100, n*100/total))
	}
	if secs := el.Seconds(); secs > 0 {
		fmt.Fprintf(&b, ", %s/s", p.amount(int64(float64(n)/secs)))
	}
	fmt.Fprintf(&b, ", %s", el.Round(100*time.Millisecond))
	if e := p.extra.Load(); e != nil && *e != "" {
		fmt.Fprintf(&b, ", %s", *e)
	}
	return b.String()
}

func (p *progress) amount(n int64) string {
	if p.unit == "" {
		return sizeString(n)
	}
	return fmt.Sprintf("%d %s", n, p.unit)
}

func (p *progress) draw() { p.line.Draw(p.text()) }

// done draws the final counts once, if the work ran past the delay, and
// clears the line, so that what the command prints next starts clean.
func (p *progress) done() {
	if p == nil || p.closed {
		return
	}
	p.closed = true
	close(p.stop)
	p.wg.Wait()
	if p.line.Drawn() || time.Since(p.start) >= p.delay {
		p.draw()
		p.line.Clear()
	}
}

// sizeString writes a byte count with a binary unit.
func sizeString(n int64) string { return draw.Size(n) }

// progressDelay is how long work runs before its progress is drawn: a
// command that ends sooner draws nothing. KV_PROGRESS_DELAY (a Go
// duration) overrides it, for a look at the bar on small stores.
func progressDelay() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("KV_PROGRESS_DELAY")); err == nil {
		return d
	}
	return time.Second
}

// storeBytes is the size of the files that a recovery or a check of dir
// reads: the snapshot and the log segments.
func storeBytes(dir string) int64 {
	names, err := vfs.OS.List(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, name := range names {
		if name == "snapshot" || strings.HasPrefix(name, "log.") && !strings.Contains(name, ".broken") {
			if fi, err := vfs.OS.Stat(path.Join(dir, name)); err == nil && fi.Mode().IsRegular() {
				n += fi.Size()
			}
		}
	}
	return n
}

// countingFS counts the bytes read through it, for the progress of a
// recovery or a check.
type countingFS struct {
	vfs.FS
	p *progress
}

// readProgress returns fsys wrapped so that what is read from dir shows
// on a progress report labelled label, and the report; fsys itself, and
// nil, when stderr is not a terminal.
func readProgress(stderr io.Writer, fsys vfs.FS, dir, label string) (vfs.FS, *progress) {
	p := newProgress(stderr, label, "", progressDelay())
	if p == nil {
		return fsys, nil
	}
	p.setTotal(storeBytes(dir))
	return countingFS{fsys, p}, p
}

func (c countingFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return countingFile{f, c.p}, nil
}

// Open implements vfs.FS.
func (c countingFS) Open(name string) (vfs.File, error) { return c.wrap(c.FS.Open(name)) }

// OpenReadWrite implements vfs.FS.
func (c countingFS) OpenReadWrite(name string) (vfs.File, error) {
	return c.wrap(c.FS.OpenReadWrite(name))
}

type countingFile struct {
	vfs.File
	p *progress
}

func (f countingFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(b, off)
	f.p.add(int64(n))
	return n, err
}

// WillNeed passes the read-ahead hint on (see vfs.WillNeed).
func (f countingFile) WillNeed() { vfs.WillNeed(f.File) }
