package httpsched

import (
	"context"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
)

// cpuWork returns a handler whose requests each compute for about run of
// CPU, as measured here on one goroutine (CRC32 passes over a buffer),
// calling Checkpoint between passes; it returns when one fails.
func cpuWork(run time.Duration) http.Handler {
	buf := make([]byte, 4<<10)
	var sink atomic.Uint32
	blocks := 0
	for start := time.Now(); time.Since(start) < run; blocks++ {
		sink.Add(crc32.ChecksumIEEE(buf))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		task := TaskFrom(r.Context())
		for range blocks {
			sink.Add(crc32.ChecksumIEEE(buf))
			if err := task.Checkpoint(); err != nil {
				return
			}
		}
	})
}

// TestRunLongerThanMaxQueueWait: a route whose requests each run several
// times WithMaxQueueWait's d keeps serving about what its workers can. Two
// requests sharing a slot each wait about the other's run, over d, so the
// limit sits near the worker count and sheds the rest at once; the clients
// here pause briefly after a 503, as a client that reads Retry-After at
// all does. The halves with and without the option alternate in one test,
// so the ratio, not the machine's speed, is what is checked.
func TestRunLongerThanMaxQueueWait(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 2 s")
	}
	const (
		workers = 2
		clients = 4
		run     = 20 * time.Millisecond
		d       = 5 * time.Millisecond
		pause   = 2 * time.Millisecond
		length  = 500 * time.Millisecond // each of four halves
	)
	work := cpuWork(run)
	served := func(opts ...Option) (ok, shed int64) {
		s, err := cpusched.New(cpusched.WithIsolation(cpusched.IsolationNone), cpusched.WithWorkers(workers))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		h := Handler(s, work, opts...)
		var okN, shedN atomic.Int64
		end := time.Now().Add(length)
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for time.Now().Before(end) {
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
					switch rec.Code {
					case http.StatusOK:
						okN.Add(1)
					case http.StatusServiceUnavailable:
						shedN.Add(1)
						time.Sleep(pause)
					default:
						t.Errorf("got status %d, want 200 or 503", rec.Code)
						return
					}
				}
			})
		}
		wg.Wait()
		return okN.Load(), shedN.Load()
	}
	// Alternated, so that a change in the machine's load falls on both.
	var without, with, shed int64
	for range 2 {
		n, _ := served()
		without += n
		n, m := served(WithMaxQueueWait(d))
		with, shed = with+n, shed+m
	}
	t.Logf("served %d without WithMaxQueueWait(%v), %d with it (%d shed), requests of %v", without, d, with, shed, run)
	if without < 20 {
		t.Skipf("served %d requests without the option in 2 x %v: the machine is too busy to compare", without, length)
	}
	if shed == 0 {
		t.Errorf("no request shed with requests of %v against a d of %v", run, d)
	}
	// A limit stuck below the worker count would serve about half.
	if float64(with) < 0.65*float64(without) {
		t.Errorf("served %d with WithMaxQueueWait(%v) against %d without: under 65%%", with, d, without)
	}
}
