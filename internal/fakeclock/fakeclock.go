// Package fakeclock is a clock that moves only when told to, for the
// tests and checkers of leases: kv.Options.Clock takes one, so that a
// test reaches a deadline without sleeping.
//
// # Usage
//
//	clk := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
//	s, err := kv.Open(dir, &kv.Options{Clock: clk})
//	id, err := s.Grant(10 * time.Second)
//	clk.Advance(10 * time.Second) // the lease's deadline: the store expires it
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a clock that moves only by Advance and Set. It is safe for
// concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	c  chan time.Time
}

// New returns a clock that reads t.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the clock's time once it has
// moved d past its time now (at once, for d <= 0).
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), c: ch})
	return ch
}

// Advance moves the clock forward by d and fires the waiters it passed.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set(c.now.Add(d))
}

// Set moves the clock to t, forward or back (a stepped wall clock), and
// fires the waiters it passed.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set(t)
}

func (c *Clock) set(t time.Time) {
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(t) {
			w.c <- t
			continue
		}
		kept = append(kept, w)
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}

// WaitingAt reports whether a waiter waits for the clock to read t: a
// test that advances the clock for a loop waiting on it checks this
// first, so that the loop's wait is in place.
func (c *Clock) WaitingAt(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiters {
		if w.at.Equal(t) {
			return true
		}
	}
	return false
}
