package load

import (
	"context"
	"math"
	"testing"
	"time"
)

// FuzzOpenLoopSchedule checks the open-loop schedule at every rate Validate
// accepts (any finite rate > 0): request offsets are never negative and
// never go backwards, and dueBefore returns, at once, the count of requests
// due before t (those with an offset below t), or math.MaxInt64 if that
// count does not fit.
func FuzzOpenLoopSchedule(f *testing.F) {
	f.Add(100.0, int64(300*time.Millisecond), uint32(7))
	f.Add(0.5, int64(time.Second), uint32(1))
	f.Add(1e-300, int64(time.Second), uint32(1))
	f.Add(1e-10, int64(time.Hour), uint32(2))
	f.Add(1e300, int64(time.Second), uint32(1))
	f.Add(1e20, int64(time.Second), uint32(3))
	f.Add(1e9, int64(math.MaxInt64), uint32(math.MaxUint32))
	f.Fuzz(func(t *testing.T, rate float64, dueNs int64, i uint32) {
		if !(rate > 0) || math.IsInf(rate, 0) || dueNs < 0 {
			return // Validate refuses the rate; elapsed times are not negative
		}
		a, b := dueOffset(int64(i), rate), dueOffset(int64(i)+1, rate)
		if a < 0 || b < a {
			t.Fatalf("rate %v: request %d due at %v, request %d at %v; want offsets >= 0 that never go backwards", rate, i, a, i+1, b)
		}
		due := time.Duration(dueNs)
		counted := make(chan int64, 1)
		go func() { counted <- dueBefore(due, rate) }()
		var n int64
		select {
		case n = <-counted:
		case <-time.After(time.Second):
			t.Fatalf("dueBefore(%v, %v) still counting after 1s", due, rate)
		}
		if n == math.MaxInt64 {
			return // more than an int64 counts
		}
		if n < 0 || n > 0 && dueOffset(n-1, rate) >= due || dueOffset(n, rate) < due {
			t.Fatalf("dueBefore(%v, %v) = %d: request %d due at %v, request %d at %v", due, rate, n, n-1, dueOffset(n-1, rate), n, dueOffset(n, rate))
		}
	})
}

// TestOpenLoopTinyRateSendsOneRequest pins the bug FuzzOpenLoopSchedule
// guards: at a rate so low that request 1 falls due beyond what a Duration
// holds (-rate 1e-300), its offset overflowed to a negative one, so the run
// sent requests back to back for its whole Duration and then never returned
// (dueBefore counted forever). Only request 0 falls due within the run.
func TestOpenLoopTinyRateSendsOneRequest(t *testing.T) {
	srv := newServer(t, hello)
	for _, rate := range []float64{1e-300, 1e-11} {
		done := make(chan *Result, 1)
		go func() {
			res, err := Run(context.Background(), Config{URL: srv.URL, Concurrency: 2, Rate: rate, Duration: 50 * time.Millisecond})
			if err != nil {
				t.Errorf("rate %v: Run: %v", rate, err)
			}
			done <- res
		}()
		select {
		case res := <-done:
			if res != nil && (res.Completed != 1 || res.Unfinished != 0) {
				t.Errorf("rate %v: got %d completed, %d unfinished; want 1 and 0", rate, res.Completed, res.Unfinished)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("rate %v: Run of 50ms still running after 10s", rate)
		}
	}
}
