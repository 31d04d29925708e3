package httpsched

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/leakcheck"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/schedtest"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// serve runs one request through h with a recorder.
func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// servePanic runs one request through h and returns what ServeHTTP panicked
// with (nil if it returned).
func servePanic(h http.Handler, r *http.Request) (rec *httptest.ResponseRecorder, panicked any) {
	rec = httptest.NewRecorder()
	defer func() { panicked = recover() }()
	h.ServeHTTP(rec, r)
	return rec, nil
}

// ok is a handler that answers "ok" and counts its calls.
type ok struct{ calls atomic.Int32 }

func (h *ok) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.calls.Add(1)
	io.WriteString(w, "ok")
}

// check503 reports a response that is not 503 with Retry-After want.
func check503(t *testing.T, rec *httptest.ResponseRecorder, want string) {
	t.Helper()
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != want {
		t.Errorf("got %d Retry-After %q, want 503 Retry-After %q", rec.Code, rec.Header().Get("Retry-After"), want)
	}
}

type ctxKey struct{}

func TestTaskInHandler(t *testing.T) {
	s := schedtest.NewScheduler(t)
	h := Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		task := TaskFrom(r.Context())
		if task == nil {
			t.Error("got TaskFrom nil inside the handler, want the task")
			return
		}
		for range 3 {
			if err := task.Checkpoint(); err != nil {
				t.Errorf("Checkpoint: got %v, want nil", err)
			}
		}
		io.WriteString(w, r.Context().Value(ctxKey{}).(string))
	}))
	r := httptest.NewRequest("GET", "/", nil)
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, "value from the request"))
	rec := serve(h, r)
	if rec.Code != http.StatusOK || rec.Body.String() != "value from the request" {
		t.Errorf("got %d %q, want 200 %q", rec.Code, rec.Body, "value from the request")
	}
	if got := TaskFrom(r.Context()); got != nil {
		t.Errorf("got TaskFrom %p outside the handler, want nil", got)
	}
	if st := s.Stats(); st.Completed != 1 {
		t.Errorf("got %d tasks completed, want 1", st.Completed)
	}
}

func TestHandlerScheduledAndDirect(t *testing.T) {
	// One handler serves a scheduled route and a direct one: outside a
	// scheduled handler TaskFrom returns nil, whose methods are safe.
	s := schedtest.NewScheduler(t)
	var scheduled atomic.Int32
	hash := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		task := TaskFrom(r.Context())
		if task != nil {
			scheduled.Add(1)
		}
		for range 3 {
			if err := task.Checkpoint(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		task.Blocking(func() { io.WriteString(w, "ok") })
	})
	mux := http.NewServeMux()
	mux.Handle("GET /scheduled", Handler(s, hash))
	mux.Handle("GET /direct", hash)
	for _, path := range []string{"/scheduled", "/direct"} {
		rec := serve(mux, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusOK || rec.Body.String() != "ok" {
			t.Errorf("%s: got %d %q, want 200 %q", path, rec.Code, rec.Body, "ok")
		}
	}
	if got := scheduled.Load(); got != 1 {
		t.Errorf("got %d requests with a task, want 1 (the scheduled route's)", got)
	}
}

func TestDefaultIsolation(t *testing.T) {
	// ospriority on Linux (the handler runs on a hand-off thread), reserve
	// where that is not available.
	s, err := cpusched.New(cpusched.WithIsolation(cpusched.DefaultIsolation()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	var logs bytes.Buffer
	h := Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		if err := TaskFrom(r.Context()).Checkpoint(); err != nil {
			t.Errorf("Checkpoint: got %v, want nil", err)
		}
		io.WriteString(w, "ok")
	}), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if rec := serve(h, httptest.NewRequest("GET", "/", nil)); rec.Code != http.StatusOK || rec.Body.String() != "ok" {
		t.Errorf("got %d %q, want 200 %q", rec.Code, rec.Body, "ok")
	}
	if rec := serve(h, httptest.NewRequest("GET", "/panic", nil)); rec.Code != http.StatusInternalServerError {
		t.Errorf("got %d, want 500", rec.Code)
	}
	if !strings.Contains(logs.String(), "boom") {
		t.Errorf("got log %q, want it to contain the panic", logs.String())
	}
	t.Logf("isolation %v", s.Stats().Isolation)
}

func TestQueueFull(t *testing.T) {
	s := schedtest.NewScheduler(t, cpusched.WithQueueLimit(1))
	next := new(ok)
	h := Handler(s, next, WithRetryAfter(2500*time.Millisecond))
	release := schedtest.HoldSlot(t, s)
	queued := make(chan *httptest.ResponseRecorder)
	go func() { queued <- serve(h, httptest.NewRequest("GET", "/", nil)) }()
	schedtest.WaitQueued(t, s, 1)

	check503(t, serve(h, httptest.NewRequest("GET", "/", nil)), "3")
	if n := next.calls.Load(); n != 0 {
		t.Errorf("got %d handler calls with the queue full, want 0", n)
	}
	release()
	if rec := <-queued; rec.Code != http.StatusOK {
		t.Errorf("queued request: got %d, want 200", rec.Code)
	}
}

func TestClosed(t *testing.T) {
	s, err := cpusched.New(cpusched.WithIsolation(cpusched.IsolationNone))
	if err != nil {
		t.Fatal(err)
	}
	next := new(ok)
	h := Handler(s, next)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	check503(t, serve(h, httptest.NewRequest("GET", "/", nil)), "1")
	if n := next.calls.Load(); n != 0 {
		t.Errorf("got %d handler calls after Close, want 0", n)
	}
}

// logBuffer returns a logger that writes into the returned buffer.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var b bytes.Buffer
	return slog.New(slog.NewTextHandler(&b, nil)), &b
}

// panicAt panics with v after writing body (if any).
func panicAt(v any, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if body != "" {
			io.WriteString(w, body)
		}
		panic(v)
	})
}

func TestPanics(t *testing.T) {
	tests := []struct {
		name      string
		handler   http.Handler
		wantPanic any    // what ServeHTTP panics with
		wantCode  int    // the recorder's code
		wantLog   string // in the log ("" for none)
	}{
		{"before the response", panicAt("boom", ""), nil, http.StatusInternalServerError, "boom"},
		{"after the response started", panicAt("late boom", "partial"), http.ErrAbortHandler, http.StatusOK, "late boom"},
		{"ErrAbortHandler", panicAt(http.ErrAbortHandler, ""), http.ErrAbortHandler, http.StatusOK, ""},
		{"ErrAbortHandler after the response started", panicAt(http.ErrAbortHandler, "partial"), http.ErrAbortHandler, http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := schedtest.NewScheduler(t)
			logger, logs := logBuffer()
			rec, got := servePanic(Handler(s, tt.handler, WithLogger(logger)), httptest.NewRequest("GET", "/p", nil))
			if got != tt.wantPanic || rec.Code != tt.wantCode {
				t.Errorf("got panic %v and %d, want panic %v and %d", got, rec.Code, tt.wantPanic, tt.wantCode)
			}
			switch {
			case tt.wantLog == "" && logs.Len() != 0:
				t.Errorf("got log %q, want none", logs)
			case tt.wantLog != "" && (!strings.Contains(logs.String(), tt.wantLog) ||
				!strings.Contains(logs.String(), "panicAt") || !strings.Contains(logs.String(), "path=/p")):
				t.Errorf("got log %q, want the panic %q, the path and the stack through panicAt", logs, tt.wantLog)
			}
			if st := s.Stats(); st.Panicked != 1 || st.Started != 0 {
				t.Errorf("got %d panicked, %d running; want 1 and 0", st.Panicked, st.Started)
			}
		})
	}
}

func TestPanicThroughServer(t *testing.T) {
	// Over a real connection: a panic before the response is a 500; a panic
	// after it started cuts the response short.
	s := schedtest.NewScheduler(t)
	logger, _ := logBuffer()
	mux := http.NewServeMux()
	mux.Handle("/early", Handler(s, panicAt("early", ""), WithLogger(logger)))
	mux.Handle("/late", Handler(s, panicAt("late", strings.Repeat("x", 100)), WithLogger(logger)))
	hs := httptest.NewServer(mux)
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/early")
	if err != nil || resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("/early: got %v %v, want 500", resp, err)
	}
	if err == nil {
		resp.Body.Close()
	}
	resp, err = http.Get(hs.URL + "/late")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Errorf("/late: got a whole response, want a connection error")
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestClientGoneWhileQueued(t *testing.T) {
	s := schedtest.NewScheduler(t)
	next := new(ok)
	returned := make(chan struct{}, 1)
	sched := Handler(s, next)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sched.ServeHTTP(w, r)
		returned <- struct{}{}
	}))
	defer hs.Close()
	release := schedtest.HoldSlot(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", hs.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	clientErr := make(chan error)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		clientErr <- err
	}()
	schedtest.WaitQueued(t, s, 1)
	cancel()
	if err := <-clientErr; !errors.Is(err, context.Canceled) {
		t.Errorf("client: got %v, want context.Canceled", err)
	}
	<-returned // the handler returns while the slot is still held
	release()
	if n := next.calls.Load(); n != 0 {
		t.Errorf("got %d handler calls, want 0", n)
	}
	if st := s.Stats(); st.Canceled != 1 || st.Queued != 0 {
		t.Errorf("got %d canceled, %d queued; want 1 and 0", st.Canceled, st.Queued)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestDeadlineWhileQueued(t *testing.T) {
	// A request whose context ends in the queue gets 503, never an empty 200.
	s := schedtest.NewScheduler(t)
	next := new(ok)
	check503(t, leaveQueue(t, s, Handler(s, next), nil), "1")
	if n := next.calls.Load(); n != 0 {
		t.Errorf("got %d handler calls, want 0", n)
	}
}

// leaveQueue holds every slot of s, queues a request to h, calls
// before (if not nil) and cancels the request's context; it returns the
// answer.
func leaveQueue(t *testing.T, s *cpusched.Scheduler, h http.Handler, before func()) *httptest.ResponseRecorder {
	t.Helper()
	for range s.Workers() {
		schedtest.HoldSlot(t, s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- serve(h, httptest.NewRequestWithContext(ctx, "GET", "/", nil)) }()
	schedtest.WaitQueued(t, s, 1)
	if before != nil {
		before()
	}
	cancel()
	return <-done
}

func TestTaskOptions(t *testing.T) {
	s := schedtest.NewScheduler(t)
	if err := s.SetGroupWeight("alice", cpusched.DefaultGroupWeight); err != nil { // tracked; static is not
		t.Fatal(err)
	}
	logger, logs := logBuffer()
	next := new(ok)
	h := Handler(s, next,
		WithTaskOptions(cpusched.WithClass(cpusched.ClassBatch), cpusched.WithGroup("static")),
		WithRequestTaskOptions(func(r *http.Request) ([]cpusched.TaskOption, error) {
			if g := r.URL.Query().Get("group"); g != "" {
				return []cpusched.TaskOption{cpusched.WithGroup(g)}, nil
			}
			if r.URL.Query().Has("bad") {
				return []cpusched.TaskOption{cpusched.WithNice(99)}, nil
			}
			return nil, nil
		}),
		WithLogger(logger))
	tests := []struct {
		path     string
		wantCode int
	}{
		{"/", http.StatusOK},
		{"/?group=alice", http.StatusOK},
		{"/?group=alice", http.StatusOK},
		{"/?bad", http.StatusBadRequest},
	}
	for _, tt := range tests {
		if rec := serve(h, httptest.NewRequest("GET", tt.path, nil)); rec.Code != tt.wantCode {
			t.Errorf("%s: got %d, want %d", tt.path, rec.Code, tt.wantCode)
		}
	}
	st := s.Stats()
	counts := []struct {
		name      string
		got, want uint64
	}{
		{"group static (untracked)", st.OtherGroups.Submitted, 1},
		{"group alice", st.Groups["alice"].Submitted, 2},
		{"class batch", st.Classes[cpusched.ClassBatch].Submitted, 3},
		{"handler calls", uint64(next.calls.Load()), 3},
	}
	for _, c := range counts {
		if c.got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
		}
	}
	if got := logs.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "level=INFO") || !strings.Contains(got, "WithNice(99)") {
		t.Errorf("got log %q, want the bad request's cause alone, at Info", got)
	}
}

func TestResponseController(t *testing.T) {
	s := schedtest.NewScheduler(t)
	h := Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "a")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("ResponseController.Flush: got %v, want nil", err)
		}
		w.(http.Flusher).Flush()
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)); !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("SetWriteDeadline on a recorder: got %v, want ErrNotSupported (reached through Unwrap)", err)
		}
	}))
	if rec := serve(h, httptest.NewRequest("GET", "/", nil)); !rec.Flushed || rec.Body.String() != "a" {
		t.Errorf("got flushed %t body %q, want true %q", rec.Flushed, rec.Body, "a")
	}
}

func TestInterimStatus(t *testing.T) {
	// A 103 Early Hints does not start the response: a panic after it is
	// still a 500. (Over a connection: a recorder keeps 103 as the status.)
	s := schedtest.NewScheduler(t)
	logger, _ := logBuffer()
	hs := httptest.NewServer(Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusEarlyHints)
		panic("after 103")
	}), WithLogger(logger)))
	defer hs.Close()
	resp, err := http.Get(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("got %d, want 500", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestNewHandlerErrors(t *testing.T) {
	s := schedtest.NewScheduler(t)
	next := new(ok)
	tests := []struct {
		name string
		s    *cpusched.Scheduler
		h    http.Handler
		opts []Option
		want string // the error ("" for none)
	}{
		{"valid", s, next, []Option{WithMaxQueueWait(time.Millisecond), WithRetryAfter(time.Second), nil}, ""},
		{"nil scheduler", nil, next, nil, "httpsched: the scheduler is nil"},
		{"nil handler", s, nil, nil, "httpsched: the handler is nil"},
		{"zero wait", s, next, []Option{WithMaxQueueWait(0)}, "httpsched: WithMaxQueueWait(0s): the wait must be positive"},
		{"negative wait", s, next, []Option{WithMaxQueueWait(-time.Second)}, "httpsched: WithMaxQueueWait(-1s): the wait must be positive"},
		{"short retry", s, next, []Option{WithRetryAfter(999 * time.Millisecond)}, "httpsched: WithRetryAfter(999ms): must be in 1s..24h0m0s"},
		{"long retry", s, next, []Option{WithRetryAfter(25 * time.Hour)}, "httpsched: WithRetryAfter(25h0m0s): must be in 1s..24h0m0s"},
		{"nil request options", s, next, []Option{WithRequestTaskOptions(nil)}, "httpsched: WithRequestTaskOptions(nil): the function must not be nil"},
		{"nil logger", s, next, []Option{WithLogger(nil)}, "httpsched: WithLogger(nil): the logger must not be nil"},
		{"bad task option", s, next, []Option{WithTaskOptions(cpusched.WithGroup("g"), cpusched.WithNice(99))},
			"httpsched: WithTaskOptions: cpusched: WithNice(99): nice must be in -20..19"},
		{"good task options", s, next, []Option{WithTaskOptions(cpusched.WithClass(cpusched.ClassIdle), cpusched.WithNice(19))}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := NewHandler(tt.s, tt.h, tt.opts...)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want || (err == nil) != (h != nil) {
				t.Errorf("got %v, %q; want a handler only without error, and error %q", h, got, tt.want)
			}
			func() {
				defer func() {
					p := recover()
					if perr, _ := p.(error); (tt.want == "" && p != nil) || (tt.want != "" && (perr == nil || perr.Error() != tt.want)) {
						t.Errorf("Handler: got panic %v, want %q", p, tt.want)
					}
				}()
				Handler(tt.s, tt.h, tt.opts...)
			}()
		})
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{time.Second, "1"},
		{1500 * time.Millisecond, "2"},
		{2 * time.Second, "2"},
		{24 * time.Hour, "86400"},
	}
	for _, tt := range tests {
		if got := retryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("retryAfterSeconds(%v): got %q, want %q", tt.d, got, tt.want)
		}
	}
}
