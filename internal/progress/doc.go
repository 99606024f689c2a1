// Package progress draws the progress of long work on a terminal: one
// line on stderr, redrawn in place and cleared when the work is done,
// and nothing at all when the writer is not a terminal (a pipe, a file,
// a test's buffer), so that logs and scripts never see it. The kv
// command's recovery, load, dump, check and repair lines and the kill
// driver's bar both draw through it.
//
// # What it guarantees
//
// A Line draws only on a terminal (IsTerminal), writes "\r\x1b[K" and
// the text, never a newline, and Clear leaves the cursor at the start
// of an empty line, so that what is printed next starts clean. A nil
// *Line does nothing, so a caller need not ask whether there is a
// terminal.
//
// # Why not a library
//
// kv drew its bar with github.com/schollz/progressbar once, and removed
// it on purpose: its package initialisation, and net/http's that it
// brings, cost every one-shot kv process (a put, a get) start-up time
// before it did any work, though most never draw a bar. This package
// imports nothing but the standard library and golang.org/x/term, and
// does nothing at init.
//
// # Usage
//
//	l := progress.NewLine(os.Stderr) // nil when stderr is not a terminal
//	for i := range n {
//		work(i)
//		l.Draw(progress.Bar("copy", i+1, n, start))
//	}
//	l.Clear()
package progress
