package httpsched_test

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/servetest"
)

func TestAutoRouteStats(t *testing.T) {
	servetest.CheckAutoRouteStats(t, func(s *cpusched.Scheduler, block func()) http.Handler {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
			servetest.Spin(3 * time.Millisecond)
			block()
			io.WriteString(w, "ok")
		})
		mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
			servetest.Spin(3 * time.Millisecond)
			io.WriteString(w, "ok")
		})
		mux.HandleFunc("GET /light", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		return httpsched.Auto(s, mux, httpsched.WithMaxQueueWait(time.Hour))
	}, "GET /users/{id}", "GET /hello", "GET /light")
}

// TestAutoReleasesSlotWhileHandlerSleeps: a heavy route's request that
// sleeps mid-way, not knowing it runs as a task, gives its only slot to
// the next request (AutoIdleRelease) in the default mode on Linux.
func TestAutoReleasesSlotWhileHandlerSleeps(t *testing.T) {
	servetest.CheckAutoIdleRelease(t, func(s *cpusched.Scheduler) http.Handler {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /work", servetest.Work)
		return httpsched.Auto(s, mux)
	})
}

// TestAutoRouteTurnsHeavy: a route light for its first requests that
// grows heavy is moved within a few hundred requests, and moved back
// once cheap again.
func TestAutoRouteTurnsHeavy(t *testing.T) {
	servetest.CheckAutoTurnsHeavy(t, func(s *cpusched.Scheduler, cost *atomic.Int64, opts ...httpsched.Option) http.Handler {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /work", func(w http.ResponseWriter, r *http.Request) { servetest.Spin(time.Duration(cost.Load())) })
		return httpsched.Auto(s, mux, opts...)
	})
}
