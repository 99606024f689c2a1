package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/vfs"
	"github.com/kvstore/kv/wal"
	"github.com/spf13/cobra"
)

type logOpts struct{ json bool }

func newLogCmd(g *globalOpts) *cobra.Command {
	o := &logOpts{}
	c := &cobra.Command{
		Use:   "log DIR",
		Short: "Print the records of the write-ahead log",
		Long: `log prints every record of every segment, one per line: segment,
offset, revision and operation (as an op line that "kv DIR load" reads).
It reads damaged segments too, and says where a segment's readable
records stop and why. On a log with no records, it says so. It takes no
lock and writes nothing.

With --json every line is a JSON object, the damage included: a record
is {"segment", "offset", "revision", "ops": [...]}; where a segment's
records stop, {"segment", "offset", "damage": REASON, "torn": BOOL}
(torn: a crash's tail, which recovery cuts; else corruption, which it
refuses); an empty log is {"empty": true, "segments": N}.`,
		Example: `  kv data log
  kv data log --json | jq -c 'select(.damage)'`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := requireDir(a[0]); err != nil {
				return err
			}
			return printLog(cmd.OutOrStdout(), a[0], o.json)
		},
		ValidArgsFunction: completeDir,
	}
	jsonFlag(c, &o.json, "print one JSON object per record")
	return c
}

type jsonOp struct {
	Op string `json:"op"`
	jsonKey
	*jsonValue
	Delta *int64 `json:"delta,omitempty"`
	Lease uint64 `json:"lease,omitempty"`
}

type jsonRecord struct {
	Segment   string   `json:"segment"`
	Offset    int64    `json:"offset"`
	Revision  uint64   `json:"revision,omitempty"`
	Txn       bool     `json:"txn,omitempty"`
	Succeeded bool     `json:"succeeded,omitempty"`
	Compares  int      `json:"compares,omitempty"`
	Ops       []jsonOp `json:"ops,omitempty"`
	Lease     *jsonLC  `json:"lease,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// jsonDamage is where a segment's readable records stop.
type jsonDamage struct {
	Segment string `json:"segment"`
	Offset  int64  `json:"offset"`
	Damage  string `json:"damage"`
	Torn    bool   `json:"torn"`
}

func printLog(w io.Writer, dir string, asJSON bool) error {
	segs, err := wal.ListSegments(vfs.OS, dir)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	rd := &wal.Reader{FS: vfs.OS, Dir: dir}
	records := 0
	for i, s := range segs {
		newest := i == len(segs)-1
		info, err := rd.Scan(s, newest, func(r wal.Record) error {
			records++
			jr := jsonRecord{Segment: wal.SegmentName(s), Offset: r.Offset}
			rec, derr := record.Decode(r.Payload)
			if derr != nil {
				jr.Error = derr.Error()
			} else {
				jr.Revision, jr.Txn, jr.Succeeded, jr.Compares = uint64(rec.Revision), rec.Txn, rec.Succeeded, len(rec.Compares)
				for _, op := range rec.Ops {
					j := jsonOp{Op: op.Kind.String(), jsonKey: keyJSON(op.Key), Lease: uint64(op.Lease)}
					switch op.Kind {
					case record.KindPut:
						j.jsonValue = valueJSON(op.Value)
					case record.KindAdd:
						d := op.Delta
						j.Delta = &d
					}
					jr.Ops = append(jr.Ops, j)
				}
				jr.Lease = jsonLeaseChange(&rec.Lease)
			}
			if asJSON {
				return enc.Encode(jr)
			}
			_, err := fmt.Fprintf(w, "%s %8d  %s\n", jr.Segment, jr.Offset, describeRecord(rec, derr))
			return err
		})
		name := wal.SegmentName(s)
		switch {
		case err != nil:
			off := info.End
			var ce *wal.CorruptError
			if errors.As(err, &ce) && ce.Offset >= 0 {
				off = ce.Offset
			}
			if asJSON {
				enc.Encode(jsonDamage{Segment: name, Offset: off, Damage: describe(err)})
			} else {
				fmt.Fprintf(w, "%s: readable records stop: %s\n", name, describe(err))
			}
		case info.Torn && asJSON:
			enc.Encode(jsonDamage{Segment: name, Offset: info.End, Damage: info.TornReason, Torn: true})
		case info.Torn:
			fmt.Fprintf(w, "%s: torn tail at offset %d (%s): recovery cuts it\n", name, info.End, info.TornReason)
		case info.Sealed && !asJSON:
			fmt.Fprintf(w, "%s: sealed\n", name)
		}
	}
	if records == 0 {
		if asJSON {
			return enc.Encode(map[string]any{"empty": true, "segments": len(segs)})
		}
		what := "no log segment"
		if len(segs) > 0 {
			what = kvcli.Plural(int64(len(segs)), "segment")
		}
		_, err := fmt.Fprintf(w, "the log holds no records (%s; what a snapshot holds, 'kv DIR dump' shows)\n", what)
		return err
	}
	return nil
}

func describeRecord(rec record.Record, err error) string {
	if err != nil {
		return "undecodable record: " + err.Error()
	}
	ops := make([]string, len(rec.Ops))
	for i, op := range rec.Ops {
		ops[i] = opmodel.OpLine(op)
		if op.Kind == record.KindPut && op.Lease != 0 {
			ops[i] += fmt.Sprintf(" lease %d", op.Lease)
		}
	}
	if rec.Lease.Action != 0 {
		return fmt.Sprintf("rev %d  %s", rec.Revision, describeLease(&rec.Lease, ops))
	}
	if rec.Txn {
		branch := "then"
		if !rec.Succeeded {
			branch = "else"
		}
		return fmt.Sprintf("rev %d  txn (%d compares, %s): %s", rec.Revision, len(rec.Compares), branch, strings.Join(ops, "; "))
	}
	return fmt.Sprintf("rev %d  %s", rec.Revision, strings.Join(ops, "; "))
}
