package main

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
)

// jsonEntry is one key in --json output. Key and value are strings when
// they are valid UTF-8; otherwise they are base64 in key_base64 and
// value_base64.
type jsonEntry struct {
	Key         string      `json:"key,omitempty"`
	KeyBase64   []byte      `json:"key_base64,omitempty"`
	Value       *string     `json:"value,omitempty"`
	ValueBase64 []byte      `json:"value_base64,omitempty"`
	CreateRev   kv.Revision `json:"create_revision"`
	ModRev      kv.Revision `json:"mod_revision"`
	Version     int64       `json:"version"`
}

func toJSON(e kv.Entry) jsonEntry {
	j := jsonEntry{CreateRev: e.CreateRev, ModRev: e.ModRev, Version: e.Version}
	if utf8.Valid(e.Key) {
		j.Key = string(e.Key)
	} else {
		j.KeyBase64 = e.Key
	}
	if utf8.Valid(e.Value) {
		v := string(e.Value)
		j.Value = &v
	} else {
		j.ValueBase64 = e.Value
	}
	return j
}

// printEntries writes entries as key=value lines or, with asJSON, as one
// JSON object per line.
func printEntries(w io.Writer, entries func(yield func(kv.Entry) bool), asJSON bool) error {
	enc := json.NewEncoder(w)
	var err error
	entries(func(e kv.Entry) bool {
		if asJSON {
			err = enc.Encode(toJSON(e))
		} else {
			_, err = io.WriteString(w, opmodel.DumpLine(e.Key, e.Value))
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
			return nil, usagef("%s %s: starts with a quote but is not a Go-quoted string", what, s)
		}
		return []byte(u), nil
	}
	return []byte(s), nil
}
