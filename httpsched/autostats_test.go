package httpsched_test

import (
	"io"
	"net/http"
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
