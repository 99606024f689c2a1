package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/spf13/cobra"
)

type loadOpts struct {
	ack bool
}

func newLoadCmd(g *globalOpts) *cobra.Command {
	o := &loadOpts{}
	c := &cobra.Command{
		Use:   "load DIR",
		Short: "Apply put/del/add lines from stdin, in order, with group commit",
		Long: `load reads operations from stdin, one per line:

  put KEY VALUE
  del KEY
  add KEY N

Blank lines and lines starting with # are skipped. A KEY or VALUE that
starts with a double quote is read as a Go-quoted string (for spaces and
other bytes). The operations commit in input order, sharing group
commits; each gets its own revision (a del of a missing key commits a
record that changes nothing). DIR is created if needed.

With --ack, "ack N" is printed and flushed as soon as operation N
(counting operations from 1) is durable, and nothing else goes to stdout:
the kill test reads these lines as the store's promises.

A malformed line is an error naming its line number; the operations
before it stay committed (and acknowledged).`,
		Example: `  printf 'add c 1\nput k1 v1\ndel k1\n' | kv data load
  kv data load --ack < ops.txt`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			s, err := g.open(a[0], false, false)
			if err != nil {
				return err
			}
			defer s.Close()
			n, err := load(s, cmd.InOrStdin(), cmd.OutOrStdout(), o.ack)
			if err != nil {
				return err
			}
			if err := s.Close(); err != nil {
				return err
			}
			if !o.ack {
				fmt.Fprintf(cmd.ErrOrStderr(), "kv: %d operations committed\n", n)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&o.ack, "ack", false, `print "ack N" when operation N is durable`)
	return c
}

// window bounds the operations in flight.
const window = 512

// load submits the operations of in, in order, and waits for them; with
// ack it prints each acknowledgement as it comes.
func load(s *kv.Store, in io.Reader, out io.Writer, ack bool) (int, error) {
	type inflight struct {
		n int
		p *kv.Pending
	}
	pending := make(chan inflight, window)
	waitErr := make(chan error, 1)
	go func() {
		var first error
		for f := range pending {
			if _, _, err := f.p.Wait(); err != nil {
				if first == nil {
					first = fmt.Errorf("operation %d: %w", f.n, err)
				}
				continue
			}
			if ack && first == nil {
				if _, err := fmt.Fprintf(out, "ack %d\n", f.n); err != nil {
					first = err
				}
			}
		}
		waitErr <- first
	}()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	line, n := 0, 0
	var perr error
	for sc.Scan() {
		line++
		op, ok, err := opmodel.ParseLine(sc.Text())
		if err != nil {
			perr = usageError{fmt.Errorf("stdin line %d: %w", line, err)}
			break
		}
		if !ok {
			continue
		}
		n++
		pending <- inflight{n: n, p: s.Submit(op)}
	}
	if perr == nil && sc.Err() != nil {
		perr = fmt.Errorf("stdin line %d: %w", line+1, sc.Err())
	}
	close(pending)
	if err := <-waitErr; err != nil {
		return n, err
	}
	if perr != nil {
		// The operations before the bad line are committed: say so.
		var ue usageError
		if errors.As(perr, &ue) {
			return n, exitError{code: exitFailed, msg: fmt.Sprintf("%v (the %d operations before it are committed)", ue.error, n)}
		}
		return n, perr
	}
	return n, nil
}
