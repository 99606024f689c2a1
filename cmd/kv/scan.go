package main

import "github.com/spf13/cobra"

type scanOpts struct{ json bool }

func newScanCmd(g *globalOpts) *cobra.Command {
	o := &scanOpts{}
	c := &cobra.Command{
		Use:   "scan DIR [PREFIX]",
		Short: "Print the keys that start with a prefix, as dump does",
		Example: `  kv data scan user/
  kv data scan --json`,
		Args: args(1, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			var prefix []byte
			if len(a) == 2 {
				var err error
				if prefix, err = parseArg("prefix", a[1]); err != nil {
					return err
				}
			}
			s, err := g.open(a[0], true, true)
			if err != nil {
				return err
			}
			defer s.Close()
			return printEntries(cmd.OutOrStdout(), s.ScanPrefix(prefix), o.json)
		},
	}
	c.Flags().BoolVar(&o.json, "json", false, "print one JSON object per key, with its revisions")
	return c
}
