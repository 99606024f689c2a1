package main

import (
	"io"
	"iter"

	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/kv"
	"github.com/spf13/cobra"
)

// The JSON output of every command follows one rule for keys and values
// (jsonHelp says it to users); the types and the printing of the verbs
// that also run on etcd are kvcli's, so that kv --etcd prints the same.

type (
	jsonKey   = kvcli.KeyJSON
	jsonValue = kvcli.ValueJSON
)

func keyJSON(k []byte) jsonKey                { return kvcli.JSONKey(k) }
func valueJSON(v []byte) *jsonValue           { return kvcli.JSONValue(v) }
func parseArg(what, s string) ([]byte, error) { return kvcli.ParseArg(what, s) }
func printEntries(w io.Writer, entries iter.Seq[kv.Entry], asJSON bool, tick func()) error {
	return kvcli.PrintEntries(w, entries, asJSON, tick)
}

// jsonFlag adds --json to c.
func jsonFlag(c *cobra.Command, p *bool, what string) {
	c.Flags().BoolVar(p, "json", false, what+` (see "kv help json")`)
}

const jsonHelp = `With --json, a command prints JSON objects, one per line (JSON Lines),
and nothing else on stdout.

Keys and values, in every object that has them, follow one rule:

  "key", "value"                 always JSON strings: the bytes as text
                                 (bytes that are not valid UTF-8 become
                                 U+FFFD)
  "key_base64", "value_base64"   always there too: the exact bytes, in
                                 standard base64

So jq .value is the text of a value, and jq -r .value_base64 | base64 -d
its exact bytes, whatever the value holds.

The objects:

  get, scan, dump   one per key: key, key_base64, value, value_base64,
                    create_revision, mod_revision, version (scan
                    --keys-only leaves out value and value_base64;
                    scan --count prints {"count": N} alone)
  put               {"op": "put", key, key_base64, "revision": N}, and
                    with --ttl or --lease "lease": {"id": ID, "deadline":
                    RFC 3339 time}
  del               {"op": "del", key, key_base64, "deleted": 1 or 0,
                    "revision": N} (for 0, the store's revision)
  add               {"op": "add", key, key_base64, value, value_base64
                    (the new value, in decimal), "revision": N}
  load              {"committed": N, "lines": L, "last_line": M}:
                    operations committed, lines read, the line of the last
                    committed operation
  log               one per record: segment, offset, revision, ops (each
                    with op, key, key_base64, and value, value_base64 or
                    delta); where a segment's records stop, one object
                    with segment, offset and "damage" (the reason), and
                    "torn": true when recovery cuts it, false when it
                    refuses it; {"empty": true, ...} for an empty log
  check             {"ok": bool, "problems": [...], ...}
  stat              one object: snapshot, segments, keys, bytes, revision
  checkpoint        {"revision": N, "keys": K, "segment": "log.NNNNNN"}
  backup, restore   {"revision": N, "keys": K, "leases": L, "hash": H}, and
                    for backup "bytes": its size
  verify            {"same": true, "revision": N (the backup's), "keys",
                    "leases", "hash", "store_revision"}; a difference is
                    an error (exit 1)
  repair            {"steps": [...], "drops": [...], "keep_through": N,
                    "skip": N, "applied": bool}
  locks             one per holder (see kv locks --help); sweep, one per
                    holder removed
  lease             list, grant, keepalive: one per lease: id, ttl,
                    ttl_ns, deadline, deadline_unix_ns, keys; revoke
                    {"id": ID, "revision": N}
  crashsim          the reports, as one JSON array, and
  killtest          the result, as one object: these two keep the names
                    of the checkers' Go fields (Workload, Models, ...)
  lock, demo        no JSON: lock prints nothing of its own, demo is a
                    story

Errors are not JSON: they are one line on stderr, and the exit status
says what happened (see "kv --help").

Examples:
  kv data get k1 --json | jq -r .value
  kv data dump --json | jq -r 'select(.version > 1) | .key'
  kv data put k1 v2 --json | jq .revision`

// newJSONHelp is the help topic "kv help json".
func newJSONHelp() *cobra.Command {
	return &cobra.Command{
		Use:   "json",
		Short: "The JSON output of --json: one rule for keys and values",
		Long:  jsonHelp,
	}
}
