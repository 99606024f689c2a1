package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/spf13/cobra"
)

type scanOpts struct {
	json     bool
	from, to string
	limit    int
	keysOnly bool
	count    bool
}

func newScanCmd(g *globalOpts) *cobra.Command {
	o := &scanOpts{}
	c := &cobra.Command{
		Use:   "scan DIR [PREFIX]",
		Short: "Print the keys of a prefix or a range, as dump does",
		Long: `scan prints the keys that start with PREFIX (every key without one), in
key order, one KEY=VALUE line each, as dump prints them (a line that
"kv DIR load" reads back).

--from K starts at key K (included) and --to K stops before key K (as
etcd's range end), together with PREFIX or without; --limit N prints at
most N keys. --keys-only prints the keys alone (Go-quoted when dump would
quote them), --count only how many keys there are. Keys given to PREFIX,
--from and --to that start with a double quote are read Go-quoted.

scan is a read command: it never waits for the writer's lock (see "kv
--help", Locks), and reads one moment of the store.`,
		Example: `  kv data scan user/
  kv data scan --from k2 --to k5
  kv data scan user/ --limit 10 --keys-only
  kv data scan user/ --count
  kv data scan --json | jq -r .key`,
		Args: args(1, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			var prefix []byte
			if len(a) == 2 {
				var err error
				if prefix, err = parseArg("prefix", a[1]); err != nil {
					return err
				}
			}
			start, end := prefix, prefixEnd(prefix)
			if o.from != "" {
				from, err := parseArg("--from", o.from)
				if err != nil {
					return err
				}
				if bytes.Compare(from, start) > 0 {
					start = from
				}
			}
			if o.to != "" {
				to, err := parseArg("--to", o.to)
				if err != nil {
					return err
				}
				if end == nil || bytes.Compare(to, end) < 0 {
					end = to
				}
			}
			if o.limit < 0 {
				return usagef("--limit: %d is below 0", o.limit)
			}
			s, err := g.openRead(a[0], false, false)
			if err != nil {
				return err
			}
			defer s.Close()
			return o.print(cmd.OutOrStdout(), s, start, end)
		},
		ValidArgsFunction: completeDirKey,
	}
	f := c.Flags()
	jsonFlag(c, &o.json, "print one JSON object per key, with its revisions")
	f.StringVar(&o.from, "from", "", "start at this key (included)")
	f.StringVar(&o.to, "to", "", "stop before this key")
	f.IntVar(&o.limit, "limit", 0, "print at most this many keys (0: all)")
	f.BoolVar(&o.keysOnly, "keys-only", false, "print the keys alone")
	f.BoolVar(&o.count, "count", false, "print only the number of keys")
	return c
}

func (o *scanOpts) print(w io.Writer, s *kv.Store, start, end []byte) error {
	enc := json.NewEncoder(w)
	n := 0
	var err error
	entries := s.Scan(start, end)
	if end != nil && bytes.Compare(start, end) >= 0 {
		entries = func(func(kv.Entry) bool) {} // an empty range
	}
	for e := range entries {
		if o.limit > 0 && n == o.limit {
			break
		}
		n++
		switch {
		case o.count:
		case o.json:
			err = enc.Encode(toJSON(e, !o.keysOnly))
		case o.keysOnly:
			_, err = fmt.Fprintln(w, opmodel.ShowKey(e.Key))
		default:
			_, err = io.WriteString(w, opmodel.DumpLine(e.Key, e.Value))
		}
		if err != nil {
			return err
		}
	}
	if o.count {
		if o.json {
			return enc.Encode(map[string]int{"count": n})
		}
		_, err = fmt.Fprintln(w, n)
	}
	return err
}

// prefixEnd returns the smallest key greater than every key with the
// prefix, or nil when there is none (no prefix, or only 0xff bytes).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
