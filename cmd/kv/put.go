package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newPutCmd(g *globalOpts) *cobra.Command {
	var fence fenceFlag
	var lease leasePut
	c := &cobra.Command{
		Use:   "put DIR KEY VALUE",
		Short: "Set a key, durably, and print the revision",
		Long: `put sets KEY to VALUE and prints "revision N" once the write is durable
(under the default --sync always). It creates DIR if needed. A KEY or
VALUE that starts with a double quote is read as a Go-quoted string.

With --ttl D the key is bound to a new lease of TTL D (--lease ID binds
it to an existing one, see kv lease) and is deleted at the lease's
deadline, which put prints: the deadline is absolute and logged, so the
key still ends then after this process exits. From the deadline on no
command shows the key, and the next process to open DIR for writing
deletes it in the log. A later put without a lease unbinds the key.`,
		Example: `  kv data put k1 v1
  kv data put greeting '"hello\nworld"'
  kv data put state done --fence nightly:$KV_FENCE_TOKEN   # only while the lock is held with that token
  kv data put session/42 alice --ttl 30m                   # gone 30 minutes from now`,
		Args: args(3, 3),
		RunE: func(cmd *cobra.Command, a []string) error {
			key, err := parseArg("key", a[1])
			if err != nil {
				return err
			}
			val, err := parseArg("value", a[2])
			if err != nil {
				return err
			}
			s, err := g.open(a[0], false, false)
			if err != nil {
				return err
			}
			defer s.Close()
			if lease.set() {
				return lease.put(s, &fence, key, val, cmd.OutOrStdout())
			}
			w, err := fence.writer(s)
			if err != nil {
				return err
			}
			rev, err := w.Put(key, val)
			if err != nil {
				return fencedError(err, fence.spec)
			}
			if err := s.Close(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "revision %d\n", rev)
			return err
		},
	}
	fence.add(c)
	lease.add(c)
	return c
}
