package httpsched

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
)

// The middleware's cost per request, against the same empty handler called
// directly (BenchmarkDirect) and from a handler that calls s.Run itself
// (BenchmarkRun). IsolationNone with a slot per P, no network: the numbers
// are about the middleware, not the hand-off to a worker thread.

// emptyHandler answers with the recorder's default status and no body.
var emptyHandler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

func benchScheduler(b *testing.B) *cpusched.Scheduler {
	b.Helper()
	s, err := cpusched.New(cpusched.WithIsolation(cpusched.IsolationNone), cpusched.WithWorkers(runtime.GOMAXPROCS(0)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// runHandler is the baseline a user would write by hand: s.Run around the
// handler, no task in the context, 503 on any error.
func runHandler(s *cpusched.Scheduler, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := s.Run(r.Context(), func(*cpusched.Task) error {
			h.ServeHTTP(w, r)
			return nil
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
}

func benchServe(b *testing.B, h http.Handler, parallel bool) {
	b.Helper()
	benchServeRequest(b, h, httptest.NewRequest("GET", "/", nil), parallel)
}

// benchServeRequest serves r to h b.N times, serial or parallel.
func benchServeRequest(b *testing.B, h http.Handler, r *http.Request, parallel bool) {
	b.Helper()
	b.ReportAllocs()
	if !parallel {
		for b.Loop() {
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
	})
}

func benchModes(b *testing.B, h func(*cpusched.Scheduler) http.Handler) {
	for _, parallel := range []bool{false, true} {
		name := "serial"
		if parallel {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) { benchServe(b, h(benchScheduler(b)), parallel) })
	}
}

func BenchmarkDirect(b *testing.B) {
	benchModes(b, func(*cpusched.Scheduler) http.Handler { return emptyHandler })
}

func BenchmarkRun(b *testing.B) {
	benchModes(b, func(s *cpusched.Scheduler) http.Handler { return runHandler(s, emptyHandler) })
}

// BenchmarkRunTaskContext is BenchmarkRun with the handler given the task's
// context, as Handler does: the share of Handler's cost that is
// cpusched.Task.Context.
func BenchmarkRunTaskContext(b *testing.B) {
	benchModes(b, func(s *cpusched.Scheduler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.Run(r.Context(), func(t *cpusched.Task) error {
				emptyHandler.ServeHTTP(w, r.WithContext(t.Context()))
				return nil
			})
		})
	})
}

func BenchmarkHandler(b *testing.B) {
	benchModes(b, func(s *cpusched.Scheduler) http.Handler { return Handler(s, emptyHandler) })
}

// BenchmarkHandlerRouted is BenchmarkHandler with a request that a
// ServeMux routed (r.Pattern set): its task takes its route's kind.
func BenchmarkHandlerRouted(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		name := "serial"
		if parallel {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			r := httptest.NewRequest("GET", "/", nil)
			r.Pattern = "GET /"
			benchServeRequest(b, Handler(benchScheduler(b), emptyHandler), r, parallel)
		})
	}
}

func BenchmarkHandlerMaxQueueWait(b *testing.B) {
	benchModes(b, func(s *cpusched.Scheduler) http.Handler {
		return Handler(s, emptyHandler, WithMaxQueueWait(time.Second))
	})
}

// BenchmarkHandlerLoadMetricsHeader is BenchmarkHandler with the load
// header on every response: a load report and its formatting.
func BenchmarkHandlerLoadMetricsHeader(b *testing.B) {
	benchModes(b, func(s *cpusched.Scheduler) http.Handler {
		return Handler(s, emptyHandler, WithLoadMetricsHeader())
	})
}

// hashRounds runs n rounds of a SHA-256 chain, with a Checkpoint after each
// when task is not nil.
func hashRounds(n int, task *cpusched.Task) [sha256.Size]byte {
	sum := sha256.Sum256(nil)
	for range n {
		sum = sha256.Sum256(sum[:])
		if task != nil {
			task.Checkpoint()
		}
	}
	return sum
}

// BenchmarkShedUnderLoad shows what WithMaxQueueWait does under CPU load:
// closed-loop clients send requests of about 20 ms of CPU each to a
// one-slot scheduler for 3 seconds, with a 5 ms budget (a shed client
// pauses 5 ms). It reports the served requests' mean response time, their
// mean queueing delay in total (Task.Waited at the end of the handler: the
// sample WithMaxQueueWait sheds by) and for their first slot alone, the
// requests served per second, and the share of requests shed.
// Run it with -benchtime 1x: one iteration is the whole run.
func BenchmarkShedUnderLoad(b *testing.B) {
	start := time.Now()
	hashRounds(100_000, nil)
	rounds := int(20 * time.Millisecond * 100_000 / time.Since(start))
	for _, clients := range []int{8, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			for b.Loop() {
				s, err := cpusched.New(cpusched.WithIsolation(cpusched.IsolationReserve), cpusched.WithWorkers(1))
				if err != nil {
					b.Fatal(err)
				}
				var served, shed, latency, waited atomic.Int64
				h := Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					task := TaskFrom(r.Context())
					hashRounds(rounds, task)
					waited.Add(int64(task.Waited()))
				}), WithMaxQueueWait(5*time.Millisecond))
				var wg sync.WaitGroup
				stop := time.Now().Add(3 * time.Second)
				for range clients {
					wg.Go(func() {
						for time.Now().Before(stop) {
							rec := httptest.NewRecorder()
							sent := time.Now()
							h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
							if rec.Code != http.StatusOK {
								shed.Add(1)
								time.Sleep(5 * time.Millisecond)
								continue
							}
							served.Add(1)
							latency.Add(int64(time.Since(sent)))
						}
					})
				}
				wg.Wait()
				st := s.Stats()
				s.Close(context.Background())
				b.ReportMetric(float64(latency.Load())/float64(max(1, served.Load()))/1e6, "response-ms")
				b.ReportMetric(float64(waited.Load())/float64(max(1, served.Load()))/1e6, "wait-ms")
				b.ReportMetric(float64(served.Load())/3, "served/s")
				b.ReportMetric(float64(st.QueueWait)/float64(max(1, st.Submitted))/1e6, "first-wait-ms")
				b.ReportMetric(100*float64(shed.Load())/float64(max(1, served.Load()+shed.Load())), "shed-%")
			}
		})
	}
}
