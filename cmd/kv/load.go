package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/spf13/cobra"
)

type loadOpts struct {
	ack  bool
	json bool
}

func newLoadCmd(g *globalOpts) *cobra.Command {
	o := &loadOpts{}
	c := &cobra.Command{
		Use:   "load DIR",
		Short: "Apply put/del/add lines, or a dump, from stdin, in order, with group commit",
		Long: `load reads operations from stdin, one per line:

  put KEY VALUE
  del KEY
  add KEY N
  KEY=VALUE        a line of "kv DIR dump": a put

so "kv A dump | kv B load" copies store A into B (with B's own
revisions). Blank lines and lines starting with # are skipped. A KEY or
VALUE that starts with a double quote is read as a Go-quoted string (for
spaces and other bytes), as dump writes them. The operations commit in
input order, sharing group commits; each gets its own revision (a del of
a missing key commits a record that changes nothing). load creates DIR if
it does not exist, and needs the writer's lock (see --wait).

Every line must end with a newline: a last line without one, which a
producer that was cut off mid-line leaves, is refused and nothing of it
is committed (exit 1).

A line that does not parse, or an operation that fails (add to a value
that is not a number), stops the load: the error names its line, and
says how many operations are committed and the line of the last one.
The operations already sent on (at most 512 after the failed one) still
commit.

On SIGINT (Ctrl-C) or SIGTERM, load reads no further, waits for the
operations it has sent on, and prints how many are committed and the
line of the last one, so that the input can be resumed after it; it exits
130 (or 143). A second Ctrl-C stops at once: what was acknowledged stays
committed.

With --ack, "ack N" is printed and flushed as soon as operation N
(counting operations from 1) is durable, and nothing else goes to stdout:
the kill test reads these lines as the store's promises. With --json,
one object sums up at the end: {"committed": N, "lines": L, "last_line":
M}. On a terminal, a progress line on stderr shows the operations
committed and their rate.`,
		Example: `  printf 'add c 1\nput k1 v1\ndel k1\n' | kv data load
  kv data load < ops.txt
  kv old dump | kv new load              # copy a store
  kv data load --ack < ops.txt           # "ack N" once operation N is durable
  tail -n +1301 ops.txt | kv data load   # resume after an interrupted load that committed through line 1300`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx, stop := withInterrupt(cmd.Context(), cmd.ErrOrStderr())
			defer stop()
			s, err := g.openWrite(ctx, a[0], true)
			if err != nil {
				return err
			}
			defer s.Close()
			p := newProgress(cmd.ErrOrStderr(), "load", "operations", progressDelay())
			res, err := load(ctx, s, cmd.InOrStdin(), cmd.OutOrStdout(), o.ack, p)
			p.done()
			if cerr := s.Close(); err == nil && cerr != nil {
				err = cerr
			}
			if o.json {
				json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]int{
					"committed": res.committed, "lines": res.lines, "last_line": res.lastLine})
			}
			if err != nil {
				return err
			}
			if sig := ctx.Signal(); sig != nil {
				return exitError{code: interruptExit(sig), msg: fmt.Sprintf("interrupted (%v): %s; resume with the lines after %d",
					sig, res.committedText(), res.lastLine)}
			}
			if !o.ack && !o.json {
				fmt.Fprintf(cmd.ErrOrStderr(), "kv: %s\n", kvcli.Plural(res.committed, "operation")+" committed")
			}
			return nil
		},
	}
	c.Flags().BoolVar(&o.ack, "ack", false, `print "ack N" when operation N is durable`)
	jsonFlag(c, &o.json, "print a JSON summary at the end")
	g.storeFlags(c)
	g.valueSizeFlag(c)
	g.waitFlag(c)
	return c
}

// window bounds the operations in flight.
const window = 512

// loadResult is what a load did.
type loadResult struct {
	committed int // operations committed
	lines     int // lines read, the last one included
	lastLine  int // the line of the last operation committed
}

func (r loadResult) committedText() string {
	switch r.committed {
	case 0:
		return "no operation committed"
	case 1:
		return fmt.Sprintf("1 operation committed, from stdin line %d", r.lastLine)
	}
	return fmt.Sprintf("%d operations committed, the last from stdin line %d", r.committed, r.lastLine)
}

// shorten cuts a line of the input that an error quotes to its first
// 60 bytes, so that a line of megabytes (a value too large) does not
// fill the terminal.
func shorten(line string) string {
	most := 60
	if len(line) <= most {
		return line
	}
	for most > 0 && !utf8.RuneStart(line[most]) {
		most--
	}
	return line[:most] + fmt.Sprintf("... (%d bytes)", len(line))
}

// loadLine is one line of the input, with its number, and whether it
// ended with a newline.
type loadLine struct {
	n        int
	text     string
	complete bool
	err      error
}

// maxLine bounds a line of load's input.
const maxLine = 64 << 20

// readLines sends the lines of in, numbered from 1, until the end of in
// or ctx ends.
func readLines(ctx context.Context, in io.Reader, out chan<- loadLine) {
	defer close(out)
	r := bufio.NewReaderSize(in, 64<<10)
	for n := 1; ; n++ {
		var b strings.Builder
		var err error
		for {
			var frag []byte
			frag, err = r.ReadSlice('\n')
			b.Write(frag)
			if err != bufio.ErrBufferFull {
				break
			}
			if b.Len() > maxLine {
				err = fmt.Errorf("line longer than %d MiB", maxLine>>20)
				break
			}
		}
		text := b.String()
		l := loadLine{n: n, text: strings.TrimSuffix(text, "\n"), complete: strings.HasSuffix(text, "\n")}
		if err != nil && err != io.EOF {
			l.err = err
		} else if err == io.EOF && text == "" {
			return
		}
		select {
		case out <- l:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// load submits the operations of in, in order, and waits for them; with
// ack it prints each acknowledgement as it comes. It stops at the first
// line that does not parse, the first operation that fails, an
// incomplete last line, or when ctx ends, and waits for what it sent on.
func load(ctx context.Context, s *kv.Store, in io.Reader, out io.Writer, ack bool, p *progress) (loadResult, error) {
	type inflight struct {
		op   int // counting operations from 1
		line int
		text string
		p    *kv.Pending
	}
	var (
		mu       sync.Mutex
		res      loadResult
		failLine int
		failText string
		failErr  error
		failed   = make(chan struct{})
	)
	pending := make(chan inflight, window)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		for f := range pending {
			_, _, err := f.p.Wait()
			mu.Lock()
			if err != nil {
				if failErr == nil {
					failLine, failText, failErr = f.line, f.text, err
					close(failed)
				}
				mu.Unlock()
				continue
			}
			res.committed++
			res.lastLine = max(res.lastLine, f.line)
			first := failErr == nil
			mu.Unlock()
			p.add(1)
			if ack && first {
				if _, err := fmt.Fprintf(out, "ack %d\n", f.op); err != nil {
					mu.Lock()
					if failErr == nil {
						failLine, failErr = f.line, fmt.Errorf("writing the ack of operation %d: %w", f.op, err)
						close(failed)
					}
					mu.Unlock()
				}
			}
		}
	}()
	lines := make(chan loadLine, 64)
	rctx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	go readLines(rctx, in, lines)
	var stopErr error // the line that stopped the load
	nops, nlines := 0, 0
read:
	for {
		var l loadLine
		var ok bool
		select {
		case <-ctx.Done():
			break read
		case <-failed:
			break read
		case l, ok = <-lines:
		}
		if !ok {
			break
		}
		nlines = l.n
		if l.err != nil {
			stopErr = fmt.Errorf("stdin line %d: %w", l.n, l.err)
			break
		}
		op, isOp, err := opmodel.ParseLine(l.text)
		switch {
		case err != nil:
			stopErr = fmt.Errorf("stdin line %d: %w", l.n, err)
			break read
		case !l.complete && isOp:
			stopErr = fmt.Errorf("stdin line %d: incomplete last line (no newline at the end of the input: was its producer cut off?)", l.n)
			break read
		case !isOp:
			continue
		}
		nops++
		pending <- inflight{op: nops, line: l.n, text: strings.TrimSpace(l.text), p: s.Submit(op)}
		p.note(fmt.Sprintf("line %d", l.n))
	}
	stopReading()
	close(pending)
	<-waited
	res.lines = nlines
	switch {
	case failErr != nil:
		return res, fmt.Errorf("stdin line %d: %s: %s: not applied; %s", failLine, shorten(failText), trimKV(tooLarge(failErr)), res.committedText())
	case stopErr != nil:
		return res, exitError{code: exitFailed, msg: fmt.Sprintf("%s: not applied; %s", trimKV(stopErr), res.committedText())}
	}
	return res, nil
}
