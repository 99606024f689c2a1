package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/spf13/cobra"
)

// The JSON output of every command follows one rule for keys and values,
// so that a script can rely on it (jsonHelp says it to users):
//
//   - "key" and "value" are always JSON strings holding the bytes as
//     text; bytes that are not valid UTF-8 become U+FFFD, as
//     encoding/json writes them;
//   - "key_base64" and "value_base64" are always there beside them,
//     the exact bytes in standard base64.
//
// So jq .value gives the text of a value, and jq -r .value_base64 |
// base64 -d its exact bytes, for every key.

// jsonKey is the key of a JSON object, in both forms.
type jsonKey struct {
	Key       string `json:"key"`
	KeyBase64 []byte `json:"key_base64"`
}

func keyJSON(k []byte) jsonKey { return jsonKey{Key: string(k), KeyBase64: nonNil(k)} }

// jsonValue is a value, in both forms.
type jsonValue struct {
	Value       string `json:"value"`
	ValueBase64 []byte `json:"value_base64"`
}

func valueJSON(v []byte) *jsonValue { return &jsonValue{Value: string(v), ValueBase64: nonNil(v)} }

// nonNil makes an empty key or value print as "" rather than null.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// jsonEntry is one key of get, scan and dump.
type jsonEntry struct {
	jsonKey
	*jsonValue             // absent under scan --keys-only
	CreateRev  kv.Revision `json:"create_revision"`
	ModRev     kv.Revision `json:"mod_revision"`
	Version    int64       `json:"version"`
}

func toJSON(e kv.Entry, withValue bool) jsonEntry {
	j := jsonEntry{jsonKey: keyJSON(e.Key), CreateRev: e.CreateRev, ModRev: e.ModRev, Version: e.Version}
	if withValue {
		j.jsonValue = valueJSON(e.Value)
	}
	return j
}

// jsonWrite is the result of put, del and add.
type jsonWrite struct {
	Op string `json:"op"`
	jsonKey
	*jsonValue               // add: the new value
	Deleted    *int          `json:"deleted,omitempty"` // del: 1, or 0 for a missing key
	Revision   kv.Revision   `json:"revision"`
	Lease      *jsonPutLease `json:"lease,omitempty"` // put --ttl, --lease
}

// jsonPutLease is the lease a put bound its key to.
type jsonPutLease struct {
	ID       uint64 `json:"id"`
	Deadline string `json:"deadline"`
}

// printEntries writes entries as dump lines, KEY=VALUE, or with asJSON
// as one JSON object per line.
func printEntries(w io.Writer, entries func(yield func(kv.Entry) bool), asJSON bool, tick func()) error {
	enc := json.NewEncoder(w)
	var err error
	entries(func(e kv.Entry) bool {
		if asJSON {
			err = enc.Encode(toJSON(e, true))
		} else {
			_, err = io.WriteString(w, opmodel.DumpLine(e.Key, e.Value))
		}
		if tick != nil {
			tick()
		}
		return err == nil
	})
	return err
}

// parseArg reads a key or value given on the command line: as it is, or
// Go-quoted when it starts with a double quote (for bytes a shell cannot
// pass).
func parseArg(what, s string) ([]byte, error) {
	if strings.HasPrefix(s, `"`) {
		u, err := strconv.Unquote(s)
		if err != nil {
			return nil, usagef("%s %q starts with a double quote but is not a Go-quoted string (such as '\"a key\"')", what, s)
		}
		return []byte(u), nil
	}
	return []byte(s), nil
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
  locks             one per holder (see kv locks --help)
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

// plural is "1 thing" or "N things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
