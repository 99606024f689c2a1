package killdriver

import (
	"math/rand/v2"
	"time"
)

// window is the window of the random delays before SIGKILL. Given
// bounds are used as they are. Otherwise the window is sized from this
// machine and follows its load: it opens at 0.8 times the median time
// at which recent complete runs of the process started to change the
// directory (before that, a kill lands in the start-up of the process,
// which on a busy machine can take longer than the work itself, and
// tests little) and closes past their median time to the end by the
// factor over, so that most kills land while the process works. Every
// complete run adds a sample; the window uses the latest 15.
type window struct {
	// given is set when the bounds were given: lo and hi.
	given  bool
	lo, hi time.Duration
	// over is how far past the median end the window closes: 1.1 is a
	// tenth past it.
	over   float64
	ends   []time.Duration
	starts []time.Duration
}

const windowSamples = 15

// add notes a complete run that lived end and first changed the
// directory at start (0 if unknown).
func (w *window) add(end, start time.Duration) {
	w.ends = append(w.ends, end)
	if start > 0 {
		w.starts = append(w.starts, start)
	}
}

// bounds returns the window now.
func (w *window) bounds() (lo, hi time.Duration) {
	if w.given || len(w.ends) == 0 {
		return w.lo, w.hi
	}
	lo = w.lo
	if lo == 0 && len(w.starts) > 0 {
		lo = (median(w.starts[max(0, len(w.starts)-windowSamples):]) * 8 / 10).Truncate(100 * time.Microsecond)
	}
	end := median(w.ends[max(0, len(w.ends)-windowSamples):])
	return lo, max(lo+ceilMillis(time.Duration(float64(end-lo)*w.over)), lo)
}

// draw picks a delay in the window.
func (w *window) draw(rng *rand.Rand) time.Duration {
	lo, hi := w.bounds()
	return lo + time.Duration(rng.Float64()*float64(hi-lo))
}
