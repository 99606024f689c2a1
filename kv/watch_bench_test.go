package kv_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/kvstore/kv/kv"
)

// BenchmarkWatchFanout measures durable puts by 16 writers with 0, 1 and
// 100 watchers of every key, each watcher reading every event. puts/s is
// the writers' rate (compare watchers=0 with the others: what watchers
// cost writers); events/s the events delivered to all watchers together,
// counted until the last watcher has read the last put. A watcher that
// fell out of the history fails the benchmark.
func BenchmarkWatchFanout(b *testing.B) {
	const writers = 16
	for _, watchers := range []int{0, 1, 100} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			s, err := kv.Open(b.TempDir(), &kv.Options{WatchHistoryBytes: 256 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			from := s.Revision() + 1
			last := from + kv.Revision(b.N) - 1
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wwg sync.WaitGroup
			for range watchers {
				wwg.Add(1)
				go func() {
					defer wwg.Done()
					for ev, err := range s.Watch(ctx, nil, from) {
						if err != nil {
							b.Error(err)
							return
						}
						if ev.Revision() >= last {
							return
						}
					}
				}()
			}
			var wg sync.WaitGroup
			b.SetBytes(benchValueSize)
			b.ResetTimer()
			for w := range writers {
				n := b.N / writers
				if w < b.N%writers {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					key := make([]byte, benchKeySize)
					for i := range n {
						benchPutKey(key, w, i)
						if _, err := s.Put(key, benchValue); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			writes := b.Elapsed()
			wwg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/writes.Seconds(), "puts/s")
			if watchers > 0 {
				b.ReportMetric(float64(b.N*watchers)/b.Elapsed().Seconds(), "events/s")
			}
			if st := s.Stats(); st.WatchFellBehind != 0 {
				b.Fatalf("%d watchers fell behind", st.WatchFellBehind)
			}
		})
	}
}
