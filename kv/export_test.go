package kv

// Unflushed returns the number of changes waiting for the ordered tree.
func Unflushed(s *Store) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m.Unflushed()
}
