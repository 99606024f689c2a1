package kvcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/spf13/pflag"
)

// WatchOptions are watch's flags.
type WatchOptions struct {
	From  int64
	JSON  bool
	Prev  bool
	Count int
	// Compacted words a watch that ended because its revision is gone,
	// for the backend (what serves the oldest revision, and how to catch
	// up); nil: a generic line.
	Compacted func(ce *kv.CompactedError) string
	// Describe words any other error; nil: Trim.
	Describe func(error) string
}

// Check refuses flags out of range.
func (o *WatchOptions) Check() error {
	if o.From < 0 {
		return Usagef("--from %d: a revision is 1 or more (0: the next to commit)", o.From)
	}
	if o.Count < 0 {
		return Usagef("--count %d: a count of changes is 1 or more (0: no limit)", o.Count)
	}
	return nil
}

// WatchEventJSON is a change as watch --json prints it.
type WatchEventJSON struct {
	Type     string `json:"type"` // "put" or "del"
	Revision int64  `json:"revision"`
	EntryJSON
	Prev *EntryJSON `json:"prev,omitempty"`
}

// PrintWatch prints the changes of events until they end, ctx ends (a
// normal end: nil) or o.Count are printed. Each line is written as it
// comes (the output may be a pipe read line by line). A compacted
// revision ends it with an error matching kv.ErrCompacted (exit 1).
func PrintWatch(ctx context.Context, w io.Writer, events iter.Seq2[kv.Event, error], o *WatchOptions) error {
	enc := json.NewEncoder(w)
	n := 0
	var werr error
	for ev, err := range events {
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil // Ctrl-C or SIGTERM: the watch's normal end
			}
			var ce *kv.CompactedError
			if errors.As(err, &ce) {
				msg := fmt.Sprintf("revision %d is no longer held; the oldest there is is %d", ce.Requested, ce.Oldest)
				if o.Compacted != nil {
					msg = o.Compacted(ce)
				}
				return fmt.Errorf("watch: %s%w", msg, silent{err})
			}
			describe := Trim
			if o.Describe != nil {
				describe = o.Describe
			}
			return fmt.Errorf("watch: %s%w", describe(err), silent{err})
		}
		typ := "put"
		if ev.Type == kv.EventDelete {
			typ = "del"
		}
		if o.JSON {
			j := WatchEventJSON{Type: typ, Revision: int64(ev.Revision()), EntryJSON: JSONEntry(ev.Entry, true)}
			if ev.Type == kv.EventDelete {
				j.EntryJSON = EntryJSON{KeyJSON: j.KeyJSON, ModRev: ev.Entry.ModRev}
			}
			if ev.Prev != nil {
				p := JSONEntry(*ev.Prev, true)
				j.Prev = &p
			}
			werr = enc.Encode(j)
		} else {
			line := fmt.Sprintf("%d del %s", ev.Revision(), opmodel.ShowKey(ev.Entry.Key))
			if ev.Type == kv.EventPut {
				line = fmt.Sprintf("%d put %s", ev.Revision(), trimNewline(opmodel.DumpLine(ev.Entry.Key, ev.Entry.Value)))
			}
			if o.Prev {
				if ev.Prev != nil {
					line += " prev=" + opmodel.Show(ev.Prev.Value)
				} else {
					line += " prev=(none)"
				}
			}
			_, werr = fmt.Fprintln(w, line)
		}
		if werr != nil {
			return werr
		}
		if n++; o.Count > 0 && n >= o.Count {
			return nil
		}
	}
	return nil
}

// silent wraps an error for errors.Is and errors.As without adding its
// text to the message.
type silent struct{ err error }

func (s silent) Error() string { return "" }
func (s silent) Unwrap() error { return s.err }

func trimNewline(s string) string {
	if len(s) > 0 && s[len(s)-1] == '\n' {
		return s[:len(s)-1]
	}
	return s
}

// WatchFlags adds watch's flags to f.
func WatchFlags(f *pflag.FlagSet, o *WatchOptions) {
	f.Int64Var(&o.From, "from", 0, "the first revision to print (default: the next to commit)")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object per change: type, revision, the key's fields as get --json prints them, and prev")
	f.BoolVar(&o.Prev, "prev", false, "print the value each change replaced (\"prev=VALUE\", or prev in JSON)")
	f.IntVar(&o.Count, "count", 0, "stop after this many changes (0: no limit)")
}
