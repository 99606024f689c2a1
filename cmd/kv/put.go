package main

import (
	"io"
	"os"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/spf13/cobra"
)

type putOpts struct {
	json bool
	file string
}

func newPutCmd(g *globalOpts) *cobra.Command {
	o := &putOpts{}
	var fence fenceFlag
	var lease leasePut
	c := &cobra.Command{
		Use:   "put DIR KEY VALUE",
		Short: "Set a key, durably, and print the revision",
		Long: `put sets KEY to VALUE and prints "revision N" once the write is durable
(under the default --sync always). A KEY or VALUE that starts with a
double quote is read as a Go-quoted string. A VALUE of - is read from
stdin, to its end; with --file F, from the file F (for values that are
too big or too binary for an argument; '"-"' is the value -). A value
over 4 MiB is refused unless --max-value-size allows it.

put needs the writer's lock (see --wait). It refuses a DIR that does not
exist, which is most likely a typo, unless --create is given.

With --ttl D the key is bound to a new lease of TTL D (--lease ID binds
it to an existing one, see kv lease) and is deleted at the lease's
deadline, which put prints: the deadline is absolute and logged, so the
key still ends then after this process exits. From the deadline on no
command shows the key, and the next process to open DIR for writing
deletes it in the log. A later put without a lease unbinds the key.`,
		Example: `  kv data put k1 v1
  kv data put --create k1 v1                     # make data/ if it is missing
  kv data put greeting '"hello\nworld"'
  kv data put config - < config.yaml
  kv data put picture --file picture.png
  kv data put k1 v2 --json | jq .revision
  kv data put state done --fence nightly:$KV_FENCE_TOKEN   # only while the lock is held with that token
  kv data put session/42 alice --ttl 30m                   # gone 30 minutes from now`,
		Args: func(cmd *cobra.Command, a []string) error {
			if o.file != "" {
				if len(a) != 2 {
					return usagef("put: with --file, want DIR KEY\nUsage: %s", useLine(cmd))
				}
				return nil
			}
			return args(3, 3)(cmd, a)
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			key, err := parseArg("key", a[1])
			if err != nil {
				return err
			}
			reading := ""
			stop := onInterrupt(cmd.ErrOrStderr(), func() string {
				if reading != "" {
					return "while reading the value from " + reading + ": nothing was written"
				}
				return "the put was not acknowledged: it may or may not be committed ('kv DIR get KEY' tells)"
			})
			defer stop()
			var val []byte
			switch {
			case o.file != "":
				reading = o.file
				val, err = os.ReadFile(o.file)
			case a[2] == "-":
				reading = "stdin"
				val, err = io.ReadAll(cmd.InOrStdin())
			default:
				val, err = parseArg("value", a[2])
			}
			if err != nil {
				return err
			}
			reading = ""
			s, err := g.openWrite(cmd.Context(), a[0], g.create)
			if err != nil {
				return err
			}
			defer s.Close()
			if lease.set() {
				rev, id, deadline, err := lease.put(s, &fence, key, val)
				if err != nil {
					return tooLarge(err)
				}
				return kvcli.PrintPut(cmd.OutOrStdout(), key, rev, &kvcli.PutLease{ID: id, Deadline: deadline}, o.json)
			}
			w, err := fence.writer(s)
			if err != nil {
				return err
			}
			rev, err := w.Put(key, val)
			if err != nil {
				return tooLarge(fencedError(err, fence.spec))
			}
			if err := s.Close(); err != nil {
				return err
			}
			return kvcli.PrintPut(cmd.OutOrStdout(), key, rev, nil, o.json)
		},
		ValidArgsFunction: completeDirKey,
	}
	c.Flags().StringVar(&o.file, "file", "", "read the value from this file")
	jsonFlag(c, &o.json, "print the result as a JSON object")
	fence.add(c)
	lease.add(c)
	g.createFlag(c)
	g.waitFlag(c)
	g.storeFlags(c)
	g.valueSizeFlag(c)
	return c
}
