package kvapi

// WatchOptions configure a KV's Watch. The zero value, and a nil
// pointer, is valid: no previous states.
type WatchOptions struct {
	// Prev fills each kv.Event's Prev with the key's state before the
	// change (kv.WithPrev): nil for a put that created the key.
	Prev bool
}
