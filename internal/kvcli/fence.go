package kvcli

import (
	"context"
	"strconv"
	"strings"

	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvapi"
)

// ParseFence reads --fence NAME:TOKEN.
func ParseFence(spec string) (name string, token int64, err error) {
	i := strings.LastIndexByte(spec, ':')
	if i >= 0 {
		name = spec[:i]
		token, err = strconv.ParseInt(spec[i+1:], 10, 64)
	}
	if i < 0 || err != nil || token <= 0 {
		return "", 0, Usagef("--fence %q: want NAME:TOKEN, TOKEN a decimal number above 0", spec)
	}
	return name, token, nil
}

// FenceFor returns the fence of lock name held with token on db: the
// lock's slot key whose create revision is token (filelock's keys,
// filelock.KeyPrefix NAME/slot/N), or slot 0's when none is, which then
// fails every write (kv.ErrFenced). It is filelock.StoreFence on a
// kvapi.KV.
func FenceFor(ctx context.Context, db kvapi.KV, name string, token int64) (*kv.Fence, error) {
	if err := filelock.CheckName(name); err != nil {
		return nil, UsageError{err}
	}
	prefix := []byte(filelock.KeyPrefix + name + "/slot/")
	key := append(append([]byte(nil), prefix...), '0')
	es, _, err := db.Range(ctx, prefix, PrefixEnd(prefix), 0)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		if int64(e.CreateRev) == token {
			key = e.Key
			break
		}
	}
	return &kv.Fence{Key: key, Token: kv.Revision(token)}, nil
}
