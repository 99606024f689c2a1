package fakeclock_test

import (
	"testing"
	"time"

	"github.com/kvstore/kv/internal/fakeclock"
)

// TestAfterFiresOnlyWhenPassed: a waiter fires when the clock reaches its
// time, not before, whether moved by Advance or Set.
func TestAfterFiresOnlyWhenPassed(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := fakeclock.New(t0)
	a, b := c.After(10*time.Second), c.After(20*time.Second)
	select {
	case <-c.After(0):
	default:
		t.Fatal("After(0) did not fire at once")
	}
	c.Advance(9 * time.Second)
	select {
	case <-a:
		t.Fatal("fired 1 s early")
	default:
	}
	c.Advance(time.Second)
	if got := <-a; !got.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("fired with %v", got)
	}
	c.Set(t0) // back: b still waits for 20 s past t0
	select {
	case <-b:
		t.Fatal("b fired after the clock went back")
	default:
	}
	c.Set(t0.Add(time.Hour))
	<-b
	if !c.Now().Equal(t0.Add(time.Hour)) {
		t.Errorf("Now() = %v", c.Now())
	}
}
