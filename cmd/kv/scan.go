package main

import (
	"github.com/kvstore/kv/internal/kvcli"
	"github.com/spf13/cobra"
)

func newScanCmd(g *globalOpts) *cobra.Command {
	o := &kvcli.ScanOptions{}
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
			start, end, err := o.Range(prefix)
			if err != nil {
				return err
			}
			s, err := g.openRead(a[0], false)
			if err != nil {
				return err
			}
			defer s.Close()
			return o.Print(cmd.OutOrStdout(), s.ScanView(start, end), start, end) // printed at once: views need no copy
		},
		ValidArgsFunction: completeDirKey,
	}
	kvcli.ScanFlags(c.Flags(), o)
	return c
}
