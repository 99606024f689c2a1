package kv

// Unflushed returns the number of changes waiting for the ordered tree.
func Unflushed(s *Store) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m.UnflushedForTesting()
}

// Queued returns the number of writes waiting in the committer's queue,
// not yet taken into a group.
func Queued(s *Store) int {
	s.c.ensureStarted() // reqs is made, and read, after the start
	return len(s.reqs)
}

// CommitterStarted reports whether s's committer has started, its
// goroutines with it. A test calls it between its own operations, never
// beside a write in flight.
func CommitterStarted(s *Store) bool { return s.c != nil && s.c.running }
