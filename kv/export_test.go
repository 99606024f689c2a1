package kv

// Unflushed returns the number of changes waiting for the ordered tree.
func Unflushed(s *Store) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m.UnflushedForTesting()
}

// Queued returns the number of writes waiting in the committer's queue,
// not yet taken into a group.
func Queued(s *Store) int { return len(s.reqs) }
