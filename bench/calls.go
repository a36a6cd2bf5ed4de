package bench

import (
	"sync"
	"sync/atomic"
	"time"
)

// Together runs call(i) for every i below n, each in a goroutine of its
// own, all released at one instant once every one is started, as the
// countdown's zero releases a crowd, and returns each call's latency and
// error by i. Unlike Run with a Burst shape it has no mix and records
// nothing: the caller says what one guest does, so that a benchmark can
// time the very same exchange against flashsale and against a ceiling.
func Together(n int, call func(i int) error) ([]time.Duration, []error) {
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			t := time.Now()
			errs[i] = call(i)
			lat[i] = time.Since(t)
		})
	}
	close(start)
	wg.Wait()
	return lat, errs
}

// BackToBack has workers goroutines make n calls between them, each worker
// taking the next i as soon as its last call returned (a closed loop, so
// the rate is what the server sustains with that many in flight), and
// returns the wall time of all n and each call's latency and error by i.
// call(w, i) is call i, made by worker w.
func BackToBack(workers, n int, call func(w, i int) error) (time.Duration, []time.Duration, []error) {
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t := time.Now()
				errs[i] = call(w, i)
				lat[i] = time.Since(t)
			}
		})
	}
	wg.Wait()
	return time.Since(start), lat, errs
}

// Percentile is the p-quantile (0 to 1) of latencies sorted in ascending
// order, read at index n·p (the p99 of 2 000 is the 1 981st), the largest
// for p = 1 and 0 when there are none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}
