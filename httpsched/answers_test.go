package httpsched

// The answers httpsched writes in place of a handler: 503 when Close cut
// a task whose handler wrote nothing, 400 for bad per-request options.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/schedtest"
)

func TestClosedWhileRunning(t *testing.T) {
	// Close gives up waiting and cuts a running request's task: a handler
	// that then returns without writing gets a 503 with Retry-After from
	// httpsched (it got 200 with an empty body), and what a handler wrote
	// itself is left alone.
	tests := []struct {
		name     string
		write    func(w http.ResponseWriter) // after the cut
		wantCode int
		wantBody string
	}{
		{"wrote nothing", func(http.ResponseWriter) {}, http.StatusServiceUnavailable, "Service Unavailable\n"},
		{"set a header only", func(w http.ResponseWriter) { w.Header().Set("X-Partial", "1") }, http.StatusServiceUnavailable, "Service Unavailable\n"},
		{"wrote a status", func(w http.ResponseWriter) { w.WriteHeader(http.StatusGatewayTimeout) }, http.StatusGatewayTimeout, ""},
		{"wrote a body", func(w http.ResponseWriter) { io.WriteString(w, "partial") }, http.StatusOK, "partial"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := schedtest.NewScheduler(t)
			entered := make(chan struct{})
			h := Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(entered)
				task := TaskFrom(r.Context())
				for task.Checkpoint() == nil {
				}
				tt.write(w)
			}), WithRetryAfter(3*time.Second))
			done := make(chan *httptest.ResponseRecorder)
			go func() { done <- serve(h, httptest.NewRequest("GET", "/", nil)) }()
			<-entered
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := s.Close(ctx); err != context.Canceled {
				t.Fatalf("Close: got %v, want context.Canceled (it gives up at once)", err)
			}
			rec := <-done
			if rec.Code != tt.wantCode || rec.Body.String() != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body, tt.wantCode, tt.wantBody)
			}
			if tt.wantCode == http.StatusServiceUnavailable {
				check503(t, rec, "3")
			}
		})
	}
}

func TestClientGoneWhileRunning(t *testing.T) {
	// The request's own context ending is not Close cutting the task: a
	// handler that then returns without writing gets net/http's 200, as it
	// would without httpsched (the client is gone and sees nothing).
	s := schedtest.NewScheduler(t)
	started := make(chan struct{})
	h := Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		for TaskFrom(r.Context()).Checkpoint() == nil {
		}
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- serve(h, httptest.NewRequestWithContext(ctx, "GET", "/", nil)) }()
	<-started
	cancel()
	if rec := <-done; rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("got %d %q, want 200 and no body", rec.Code, rec.Body)
	}
}
