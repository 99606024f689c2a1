package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

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
offset, revision and operation. It reads damaged segments too, and says
where a segment's readable records stop and why. It writes nothing.`,
		Example: `  kv data log
  kv data log --json`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := requireDir(a[0]); err != nil {
				return err
			}
			return printLog(cmd.OutOrStdout(), a[0], o.json)
		},
	}
	c.Flags().BoolVar(&o.json, "json", false, "print one JSON object per record")
	return c
}

type jsonOp struct {
	Op    string `json:"op"`
	Key   string `json:"key"`
	Value string `json:"value,omitempty"`
	Delta int64  `json:"delta,omitempty"`
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

func printLog(w io.Writer, dir string, asJSON bool) error {
	segs, err := wal.ListSegments(vfs.OS, dir)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	rd := &wal.Reader{FS: vfs.OS, Dir: dir}
	for i, s := range segs {
		newest := i == len(segs)-1
		info, err := rd.Scan(s, newest, func(r wal.Record) error {
			jr := jsonRecord{Segment: wal.SegmentName(s), Offset: r.Offset}
			rec, derr := record.Decode(r.Payload)
			if derr != nil {
				jr.Error = derr.Error()
			} else {
				jr.Revision, jr.Txn, jr.Succeeded, jr.Compares = uint64(rec.Revision), rec.Txn, rec.Succeeded, len(rec.Compares)
				for _, op := range rec.Ops {
					jr.Ops = append(jr.Ops, jsonOp{Op: op.Kind.String(), Key: string(op.Key), Value: string(op.Value), Delta: op.Delta, Lease: uint64(op.Lease)})
				}
				jr.Lease = jsonLeaseChange(&rec.Lease)
			}
			if asJSON {
				return enc.Encode(jr)
			}
			_, err := fmt.Fprintf(w, "%s %8d  %s\n", jr.Segment, jr.Offset, describeRecord(rec, derr))
			return err
		})
		switch {
		case err != nil:
			fmt.Fprintf(w, "%s: readable records stop: %s\n", wal.SegmentName(s), describe(err))
		case info.Torn:
			fmt.Fprintf(w, "%s: torn tail at offset %d (%s): recovery cuts it\n", wal.SegmentName(s), info.End, info.TornReason)
		case info.Sealed && !asJSON:
			fmt.Fprintf(w, "%s: sealed\n", wal.SegmentName(s))
		}
	}
	return nil
}

func describeRecord(rec record.Record, err error) string {
	if err != nil {
		return "undecodable record: " + err.Error()
	}
	ops := make([]string, len(rec.Ops))
	for i, op := range rec.Ops {
		switch op.Kind {
		case record.KindPut:
			ops[i] = fmt.Sprintf("put %s %s", opmodel.Show(op.Key), opmodel.Show(op.Value))
			if op.Lease != 0 {
				ops[i] += fmt.Sprintf(" lease %d", op.Lease)
			}
		case record.KindDelete:
			ops[i] = fmt.Sprintf("del %s", opmodel.Show(op.Key))
		case record.KindAdd:
			ops[i] = fmt.Sprintf("add %s %d", opmodel.Show(op.Key), op.Delta)
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
