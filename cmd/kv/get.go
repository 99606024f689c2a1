package main

import (
	"github.com/kvstore/kv/internal/kvcli"
	"github.com/spf13/cobra"
)

type getOpts struct{ json, raw bool }

func newGetCmd(g *globalOpts) *cobra.Command {
	o := &getOpts{}
	c := &cobra.Command{
		Use:   "get DIR KEY",
		Short: "Print the value of a key",
		Long: `get prints the value of KEY as it is, followed by a newline; with --raw,
the value's bytes exactly, with nothing added (for binary values and
files). A missing key exits 7, with 'key "KEY" not found' on stderr,
so that a script tells it from a failure to read the store (exit 1). A
KEY that starts with a double quote is read as a Go-quoted string.

get is a read command: it never waits for the writer's lock (see "kv
--help", Locks).`,
		Example: `  kv data get k1
  kv data get k1 --json | jq -r .value
  kv data get picture --raw > picture.png
  kv data get '"a key"'`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			if o.raw && o.json {
				return usagef("get: --raw and --json do not go together")
			}
			key, err := parseArg("key", a[1])
			if err != nil {
				return err
			}
			s, err := g.openRead(a[0], false)
			if err != nil {
				return err
			}
			defer s.Close()
			e, err := s.Get(key)
			if err != nil {
				return keyError(key, err)
			}
			return kvcli.PrintGet(cmd.OutOrStdout(), e, o.json, o.raw)
		},
		ValidArgsFunction: completeDirKey,
	}
	jsonFlag(c, &o.json, "print the key as a JSON object with its revisions")
	c.Flags().BoolVar(&o.raw, "raw", false, "print the value's bytes exactly, without a newline")
	return c
}
