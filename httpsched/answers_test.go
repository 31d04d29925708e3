package httpsched

// The answers httpsched writes in place of a handler: 503 when Close cut
// a task whose handler wrote nothing, 400 for bad per-request options.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/schedtest"
)

func TestClosedWhileRunning(t *testing.T) {
	// Close gives up waiting and cuts a running request's task: a handler
	// that then returns without writing gets a 503 with Retry-After from
	// httpsched (it got 200 with an empty body), and what a handler wrote
	// itself is left alone. Either way the task is Canceled in Stats
	// (regression: three requests cut by Close and answered 503 were
	// counted Completed, the task returning nil whatever happened to it).
	// Close gives up at once, or after a short deadline while the handler
	// loops on Checkpoint.
	tests := []struct {
		name     string
		deadline time.Duration               // Close's ctx's; 0: Close gives up at once
		write    func(w http.ResponseWriter) // after the cut
		wantCode int
		wantBody string
	}{
		{"wrote nothing", 0, func(http.ResponseWriter) {}, http.StatusServiceUnavailable, "Service Unavailable\n"},
		{"wrote nothing, Close with a deadline", 20 * time.Millisecond, func(http.ResponseWriter) {}, http.StatusServiceUnavailable, "Service Unavailable\n"},
		{"set a header only", 0, func(w http.ResponseWriter) { w.Header().Set("X-Partial", "1") }, http.StatusServiceUnavailable, "Service Unavailable\n"},
		{"wrote a status", 0, func(w http.ResponseWriter) { w.WriteHeader(http.StatusGatewayTimeout) }, http.StatusGatewayTimeout, ""},
		{"wrote a body", 0, func(w http.ResponseWriter) { io.WriteString(w, "partial") }, http.StatusOK, "partial"},
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
			ctx, cancel := context.WithTimeout(context.Background(), tt.deadline)
			defer cancel()
			if err := s.Close(ctx); err != context.DeadlineExceeded {
				t.Fatalf("Close: got %v, want context.DeadlineExceeded", err)
			}
			rec := <-done
			if rec.Code != tt.wantCode || rec.Body.String() != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body, tt.wantCode, tt.wantBody)
			}
			if tt.wantCode == http.StatusServiceUnavailable {
				check503(t, rec, "3")
			}
			if st := s.Stats(); st.Canceled != 1 || st.Completed != 0 {
				t.Errorf("got %d canceled, %d completed; want 1 and 0: Close cut the task", st.Canceled, st.Completed)
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

func TestBadRequestTaskOptions(t *testing.T) {
	// WithRequestTaskOptions' function returning an error, or an invalid
	// option, answers 400 with a message naming what was wrong (and the
	// valid range), before the request takes a place in the limit or
	// reaches the scheduler (it answered 500).
	long := strings.Repeat("g", cpusched.MaxGroupNameLen+1)
	tests := []struct {
		query    string
		wantCode int
		wantBody string
	}{
		{"", http.StatusOK, "ok"},
		{"?nice=19&group=" + long[1:], http.StatusOK, "ok"},
		{"?err", http.StatusBadRequest, "tenant header missing\n"},
		{"?nice=20", http.StatusBadRequest, "cpusched: WithNice(20): nice must be in -20..19\n"},
		{"?nice=-21", http.StatusBadRequest, "cpusched: WithNice(-21): nice must be in -20..19\n"},
		{"?group=" + long, http.StatusBadRequest, "cpusched: WithGroup: name is 257 bytes, must be at most 256 (MaxGroupNameLen)\n"},
	}
	s := schedtest.NewScheduler(t)
	next := new(ok)
	h := asHandler(t, Handler(s, next, WithMaxQueueWait(time.Second),
		WithRequestTaskOptions(func(r *http.Request) ([]cpusched.TaskOption, error) {
			q := r.URL.Query()
			if q.Has("err") {
				return nil, errors.New("tenant header missing")
			}
			nice, _ := strconv.Atoi(q.Get("nice"))
			return []cpusched.TaskOption{cpusched.WithNice(nice), cpusched.WithGroup(q.Get("group"))}, nil
		})))
	var served uint64
	for _, tt := range tests {
		limit := h.limit.Current()
		rec := serve(h, httptest.NewRequest("GET", "/"+tt.query, nil))
		if rec.Code != tt.wantCode || rec.Body.String() != tt.wantBody {
			t.Errorf("%.40s: got %d %q, want %d %q", tt.query, rec.Code, rec.Body, tt.wantCode, tt.wantBody)
		}
		if rec.Code == http.StatusOK {
			served++
		} else {
			checkLimit(t, fmt.Sprintf("%.40s", tt.query), h, 0, limit) // no sample, no place
		}
	}
	if st := s.Stats(); st.Submitted != served || uint64(next.calls.Load()) != served {
		t.Errorf("got %d tasks submitted, %d handler calls; want %d: a bad request is not scheduled", st.Submitted, next.calls.Load(), served)
	}
}
