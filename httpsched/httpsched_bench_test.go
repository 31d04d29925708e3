package httpsched

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
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
	r := httptest.NewRequest("GET", "/", nil)
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

func BenchmarkHandlerMaxQueueWait(b *testing.B) {
	benchModes(b, func(s *cpusched.Scheduler) http.Handler {
		return Handler(s, emptyHandler, WithMaxQueueWait(time.Second))
	})
}
