package kv

// eventRing is the history's events in a ring: appending at the back and
// dropping from the front move no event. A slice resliced from the front
// was copied whole (about 2 MB at the default bound) each time append ran
// out of room at its end, in the committer between a group's write and
// its sync: 17% of kvbench's CPU profile of 64 durable writers.
type eventRing struct {
	buf  []histEvent // len(buf) is 0 or a power of two
	head int         // buf index of event 0
	n    int
}

// len returns the number of events.
func (r *eventRing) len() int { return r.n }

// at returns event i (0 ≤ i < len).
func (r *eventRing) at(i int) *histEvent { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

// push appends ev.
func (r *eventRing) push(ev histEvent) {
	if r.n == len(r.buf) {
		r.resize(max(64, 2*len(r.buf)))
	}
	*r.at(r.n) = ev
	r.n++
}

// drop removes the first k events (k ≤ len), zeroing them so that they
// pin no memory, and gives memory back when the ring is mostly empty.
func (r *eventRing) drop(k int) {
	for i := range k {
		*r.at(i) = histEvent{}
	}
	r.head = (r.head + k) & (len(r.buf) - 1)
	r.n -= k
	if len(r.buf) > 1024 && r.n < len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
}

// resize moves the events into a ring of size slots (a power of two, at
// least len).
func (r *eventRing) resize(size int) {
	buf := make([]histEvent, size)
	for i := range r.n {
		buf[i] = *r.at(i)
	}
	r.buf, r.head = buf, 0
}

// search returns the first i in [0, len) for which f(event i) is true, or
// len, f being false and then true over the events (sort.Search's rule).
func (r *eventRing) search(f func(*histEvent) bool) int {
	lo, hi := 0, r.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if !f(r.at(m)) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}
