package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
)

type getOpts struct{ json bool }

func newGetCmd(g *globalOpts) *cobra.Command {
	o := &getOpts{}
	c := &cobra.Command{
		Use:   "get DIR KEY",
		Short: "Print the value of a key",
		Long: `get prints the value of KEY as it is, followed by a newline. A missing
key is an error (exit 1). A KEY that starts with a double quote is read
as a Go-quoted string.`,
		Example: `  kv data get k1
  kv data get k1 --json`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			key, err := parseArg("key", a[1])
			if err != nil {
				return err
			}
			s, err := g.open(a[0], true, true)
			if err != nil {
				return err
			}
			defer s.Close()
			e, err := s.Get(key)
			if err != nil {
				return keyError(key, err)
			}
			if o.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(toJSON(e))
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", e.Value)
			return err
		},
	}
	c.Flags().BoolVar(&o.json, "json", false, "print the key as a JSON object with its revisions")
	return c
}
