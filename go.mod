module github.com/kvstore/kv

go 1.26.0

require (
	github.com/google/btree v1.1.3
	github.com/google/go-cmp v0.7.0
	golang.org/x/sys v0.50.0
)
