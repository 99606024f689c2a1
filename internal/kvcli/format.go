package kvcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/spf13/pflag"
)

// The JSON output of every command follows one rule for keys and values,
// so that a script can rely on it ("kv help json" says it to users):
//
//   - "key" and "value" are always JSON strings holding the bytes as
//     text; bytes that are not valid UTF-8 become U+FFFD, as
//     encoding/json writes them;
//   - "key_base64" and "value_base64" are always there beside them,
//     the exact bytes in standard base64.
//
// So jq .value gives the text of a value, and jq -r .value_base64 |
// base64 -d its exact bytes, for every key.

// KeyJSON is the key of a JSON object, in both forms.
type KeyJSON struct {
	Key       string `json:"key"`
	KeyBase64 []byte `json:"key_base64"`
}

// JSONKey returns k in both forms.
func JSONKey(k []byte) KeyJSON { return KeyJSON{Key: string(k), KeyBase64: nonNil(k)} }

// ValueJSON is a value, in both forms.
type ValueJSON struct {
	Value       string `json:"value"`
	ValueBase64 []byte `json:"value_base64"`
}

// JSONValue returns v in both forms.
func JSONValue(v []byte) *ValueJSON { return &ValueJSON{Value: string(v), ValueBase64: nonNil(v)} }

// nonNil makes an empty key or value print as "" rather than null.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// EntryJSON is one key of get, scan and dump.
type EntryJSON struct {
	KeyJSON
	*ValueJSON             // absent under scan --keys-only
	CreateRev  kv.Revision `json:"create_revision"`
	ModRev     kv.Revision `json:"mod_revision"`
	Version    int64       `json:"version"`
}

// JSONEntry returns e as get, scan and dump print it, with its value
// when withValue.
func JSONEntry(e kv.Entry, withValue bool) EntryJSON {
	j := EntryJSON{KeyJSON: JSONKey(e.Key), CreateRev: e.CreateRev, ModRev: e.ModRev, Version: e.Version}
	if withValue {
		j.ValueJSON = JSONValue(e.Value)
	}
	return j
}

// WriteJSON is the result of put, del and add.
type WriteJSON struct {
	Op string `json:"op"`
	KeyJSON
	*ValueJSON               // add: the new value
	Deleted    *int          `json:"deleted,omitempty"` // del: 1, or 0 for a missing key
	Revision   kv.Revision   `json:"revision"`
	Lease      *PutLeaseJSON `json:"lease,omitempty"` // put --ttl, --lease
}

// PutLeaseJSON is the lease a put bound its key to.
type PutLeaseJSON struct {
	ID       uint64 `json:"id"`
	Deadline string `json:"deadline"`
}

// FormatDeadline is how put and the lease commands print a lease's
// deadline: RFC 3339 in UTC, to the millisecond.
func FormatDeadline(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// PrintEntries writes entries as dump lines, KEY=VALUE, or with asJSON
// as one JSON object per line; tick, if not nil, is called after each.
func PrintEntries(w io.Writer, entries iter.Seq[kv.Entry], asJSON bool, tick func()) error {
	enc := json.NewEncoder(w)
	var err error
	entries(func(e kv.Entry) bool {
		if asJSON {
			err = enc.Encode(JSONEntry(e, true))
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

// ParseArg reads a key or value given on the command line: as it is, or
// Go-quoted when it starts with a double quote (for bytes a shell cannot
// pass).
func ParseArg(what, s string) ([]byte, error) {
	if strings.HasPrefix(s, `"`) {
		u, err := strconv.Unquote(s)
		if err != nil {
			return nil, Usagef("%s %q starts with a double quote but is not a Go-quoted string (such as '\"a key\"')", what, s)
		}
		return []byte(u), nil
	}
	return []byte(s), nil
}

// PrintGet prints get's answer: the value and a newline, its bytes
// exactly (raw), or its JSON object.
func PrintGet(w io.Writer, e kv.Entry, asJSON, raw bool) error {
	var err error
	switch {
	case asJSON:
		err = json.NewEncoder(w).Encode(JSONEntry(e, true))
	case raw:
		_, err = w.Write(e.Value)
	default:
		_, err = fmt.Fprintf(w, "%s\n", e.Value)
	}
	return err
}

// PutLease is the lease a put bound its key to, for PrintPut.
type PutLease struct {
	ID       kv.LeaseID
	Deadline time.Time
}

// PrintPut prints put's answer: "revision N" (and the lease's line), or
// its JSON object.
func PrintPut(w io.Writer, key []byte, rev kv.Revision, lease *PutLease, asJSON bool) error {
	if asJSON {
		j := WriteJSON{Op: "put", KeyJSON: JSONKey(key), Revision: rev}
		if lease != nil {
			j.Lease = &PutLeaseJSON{ID: uint64(lease.ID), Deadline: FormatDeadline(lease.Deadline)}
		}
		return json.NewEncoder(w).Encode(j)
	}
	if lease != nil {
		_, err := fmt.Fprintf(w, "revision %d\nlease %d, deadline %s\n", rev, lease.ID, FormatDeadline(lease.Deadline))
		return err
	}
	_, err := fmt.Fprintf(w, "revision %d\n", rev)
	return err
}

// PrintDel prints del's answer: "deleted 1, revision N", or for a key
// that was not there "deleted 0 (no key K)" (rev is then the store's
// revision, for JSON), or its JSON object.
func PrintDel(w io.Writer, key []byte, deleted bool, rev kv.Revision, asJSON bool) error {
	n := 0
	if deleted {
		n = 1
	}
	if asJSON {
		return json.NewEncoder(w).Encode(WriteJSON{Op: "del", KeyJSON: JSONKey(key), Deleted: &n, Revision: rev})
	}
	var err error
	if !deleted {
		_, err = fmt.Fprintf(w, "deleted 0 (no key %q)\n", key)
	} else {
		_, err = fmt.Fprintf(w, "deleted 1, revision %d\n", rev)
	}
	return err
}

// PrintAdd prints add's answer: the new value, or its JSON object.
func PrintAdd(w io.Writer, key []byte, v int64, rev kv.Revision, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(WriteJSON{Op: "add", KeyJSON: JSONKey(key),
			ValueJSON: JSONValue([]byte(strconv.FormatInt(v, 10))), Revision: rev})
	}
	_, err := fmt.Fprintf(w, "%d\n", v)
	return err
}

// ScanOptions are scan's flags.
type ScanOptions struct {
	JSON     bool
	From, To string
	Limit    int
	KeysOnly bool
	Count    bool
}

// Range returns the keys scan reads, start <= key < end (a nil end: no
// bound), from its PREFIX argument (nil: none) and --from and --to; an
// empty range has start >= end.
func (o *ScanOptions) Range(prefix []byte) (start, end []byte, err error) {
	start, end = prefix, PrefixEnd(prefix)
	if o.From != "" {
		from, err := ParseArg("--from", o.From)
		if err != nil {
			return nil, nil, err
		}
		if bytes.Compare(from, start) > 0 {
			start = from
		}
	}
	if o.To != "" {
		to, err := ParseArg("--to", o.To)
		if err != nil {
			return nil, nil, err
		}
		if end == nil || bytes.Compare(to, end) < 0 {
			end = to
		}
	}
	if o.Limit < 0 {
		return nil, nil, Usagef("--limit: %d is below 0", o.Limit)
	}
	return start, end, nil
}

// Print prints the entries of the range [start, end) that entries
// yields, as scan does.
func (o *ScanOptions) Print(w io.Writer, entries iter.Seq2[kv.Entry, error], start, end []byte) error {
	enc := json.NewEncoder(w)
	n := 0
	var err error
	if end != nil && bytes.Compare(start, end) >= 0 {
		entries = func(func(kv.Entry, error) bool) {} // an empty range
	}
	for e, rerr := range entries {
		if rerr != nil {
			return rerr
		}
		if o.Limit > 0 && n == o.Limit {
			break
		}
		n++
		switch {
		case o.Count:
		case o.JSON:
			err = enc.Encode(JSONEntry(e, !o.KeysOnly))
		case o.KeysOnly:
			_, err = fmt.Fprintln(w, opmodel.ShowKey(e.Key))
		default:
			_, err = io.WriteString(w, opmodel.DumpLine(e.Key, e.Value))
		}
		if err != nil {
			return err
		}
	}
	if o.Count {
		if o.JSON {
			return enc.Encode(map[string]int{"count": n})
		}
		_, err = fmt.Fprintln(w, n)
	}
	return err
}

// PrefixEnd returns the smallest key greater than every key with the
// prefix, or nil when there is none (no prefix, or only 0xff bytes).
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// ScanFlags adds scan's flags to f.
func ScanFlags(f *pflag.FlagSet, o *ScanOptions) {
	f.BoolVar(&o.JSON, "json", false, `print one JSON object per key, with its revisions (see "kv help json")`)
	f.StringVar(&o.From, "from", "", "start at this key (included)")
	f.StringVar(&o.To, "to", "", "stop before this key")
	f.IntVar(&o.Limit, "limit", 0, "print at most this many keys (0: all)")
	f.BoolVar(&o.KeysOnly, "keys-only", false, "print the keys alone")
	f.BoolVar(&o.Count, "count", false, "print only the number of keys")
}
