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
	"github.com/cpusched/cpusched/internal/admission"
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
	// option, answers 400 before the request takes a place in the limit or
	// reaches the scheduler (it answered 500). The body is "Bad Request"
	// and the cause, which names the library's options (a 300-byte tenant
	// header answered "cpusched: WithGroup: name is 300 bytes..."), goes to
	// the log at Info; WithErrorHandler's function gets it instead, to
	// write it if it will.
	long := strings.Repeat("g", cpusched.MaxGroupNameLen+1)
	tests := []struct {
		query     string
		wantCode  int
		wantCause string // "" for none
	}{
		{"", http.StatusOK, ""},
		{"?nice=19&group=" + long[1:], http.StatusOK, ""},
		{"?err", http.StatusBadRequest, "tenant header missing"},
		{"?nice=20", http.StatusBadRequest, "cpusched: WithNice(20): nice must be in -20..19"},
		{"?nice=-21", http.StatusBadRequest, "cpusched: WithNice(-21): nice must be in -20..19"},
		{"?group=" + long, http.StatusBadRequest, "cpusched: WithGroup: name is 257 bytes, must be at most 256 (MaxGroupNameLen)"},
	}
	writeCause := WithErrorHandler(func(w http.ResponseWriter, r *http.Request, status int, err error) {
		http.Error(w, fmt.Sprintf("%d: %v", status, err), status)
	})
	for _, errorHandler := range []Option{nil, writeCause} {
		s := schedtest.NewScheduler(t)
		next := new(ok)
		logger, logs := logBuffer()
		h := asHandler(t, Handler(s, next, WithMaxQueueWait(time.Second), WithLogger(logger), errorHandler,
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
			logs.Reset()
			limit := h.limit.Current()
			rec := serve(h, httptest.NewRequest("GET", "/"+tt.query, nil))
			wantBody, wantLog := "ok", ""
			switch {
			case tt.wantCause == "":
			case errorHandler == nil:
				wantBody, wantLog = "Bad Request\n", fmt.Sprintf("level=INFO msg=\"httpsched: bad request\" method=GET path=/ err=%q", tt.wantCause)
			default:
				wantBody = "400: " + tt.wantCause + "\n"
			}
			if rec.Code != tt.wantCode || rec.Body.String() != wantBody {
				t.Errorf("%.40s, error handler %t: got %d %q, want %d %q", tt.query, errorHandler != nil, rec.Code, rec.Body, tt.wantCode, wantBody)
			}
			if (wantLog == "" && logs.Len() != 0) || !strings.Contains(logs.String(), wantLog) {
				t.Errorf("%.40s, error handler %t: got log %q, want %q", tt.query, errorHandler != nil, logs, wantLog)
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
}

func TestAnswers(t *testing.T) {
	// WithErrorHandler's function writes each answer httpsched gives in
	// place of the handler, given the status and its cause, with the
	// 503's Retry-After and the load header already set; if it writes
	// nothing, the status goes out with an empty body. Sheds counts the
	// requests answered without running the handler, by reason
	// (regression: 577 requests shed by WithMaxQueueWait's limit were
	// counted nowhere).
	cutByClose := func(t *testing.T, s *cpusched.Scheduler, h http.Handler) *httptest.ResponseRecorder {
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- serve(h, httptest.NewRequest("GET", "/loop", nil)) }()
		for s.Stats().Running == 0 {
			time.Sleep(time.Millisecond)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		s.Close(ctx)
		return <-done
	}
	tests := []struct {
		name       string
		do         func(t *testing.T, s *cpusched.Scheduler, h http.Handler) *httptest.ResponseRecorder
		wantStatus int
		wantErr    func(error) bool
		wantSheds  ShedCounts
	}{
		{"bad options", func(t *testing.T, s *cpusched.Scheduler, h http.Handler) *httptest.ResponseRecorder {
			return serve(h, httptest.NewRequest("GET", "/?nice=99", nil))
		}, http.StatusBadRequest, func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "WithNice(99)")
		}, ShedCounts{BadOptions: 1}},
		{"wait limit", func(t *testing.T, s *cpusched.Scheduler, h http.Handler) *httptest.ResponseRecorder {
			groups := asHandler(t, h).limit
			var limit *admission.Limit // the default group's: the request's
			var rounds []uint64
			for lim, round, ok := groups.Admit(cpusched.TaskPlace{}); ok; lim, round, ok = groups.Admit(cpusched.TaskPlace{}) {
				limit, rounds = lim, append(rounds, round)
			}
			defer func() {
				for _, round := range rounds {
					limit.Dropped(0, round, false)
				}
			}()
			return serve(h, httptest.NewRequest("GET", "/", nil))
		}, http.StatusServiceUnavailable, is(ErrWaitLimit), ShedCounts{WaitLimit: 1}},
		{"queue full", func(t *testing.T, s *cpusched.Scheduler, h http.Handler) *httptest.ResponseRecorder {
			schedtest.HoldSlot(t, s)
			if _, err := s.Go(context.Background(), func(*cpusched.Task) error { return nil }); err != nil {
				t.Fatal(err) // fills the queue of 1
			}
			return serve(h, httptest.NewRequest("GET", "/", nil))
		}, http.StatusServiceUnavailable, is(cpusched.ErrQueueFull), ShedCounts{QueueFull: 1}},
		{"closed", func(t *testing.T, s *cpusched.Scheduler, h http.Handler) *httptest.ResponseRecorder {
			s.Close(context.Background())
			return serve(h, httptest.NewRequest("GET", "/", nil))
		}, http.StatusServiceUnavailable, is(cpusched.ErrClosed), ShedCounts{Closed: 1}},
		{"closed while queued", func(t *testing.T, s *cpusched.Scheduler, h http.Handler) *httptest.ResponseRecorder {
			release := schedtest.HoldSlot(t, s)
			done := make(chan *httptest.ResponseRecorder)
			go func() { done <- serve(h, httptest.NewRequest("GET", "/", nil)) }()
			schedtest.WaitQueued(t, s, 1)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			s.Close(ctx) // removes the queued request's task
			release()
			return <-done
		}, http.StatusServiceUnavailable, is(cpusched.ErrClosed), ShedCounts{Closed: 1}},
		{"cut by Close", cutByClose, http.StatusServiceUnavailable, is(cpusched.ErrClosed), ShedCounts{}}, // ran: Canceled
		{"left while queued", func(t *testing.T, s *cpusched.Scheduler, h http.Handler) *httptest.ResponseRecorder {
			return leaveQueue(t, s, h, nil)
		}, http.StatusServiceUnavailable, is(context.Canceled), ShedCounts{}}, // queued: Canceled
		{"panic", func(t *testing.T, s *cpusched.Scheduler, h http.Handler) *httptest.ResponseRecorder {
			return serve(h, httptest.NewRequest("GET", "/panic", nil))
		}, http.StatusInternalServerError, func(err error) bool {
			var pe *cpusched.PanicError
			return errors.As(err, &pe) && pe.Value == "handler panics"
		}, ShedCounts{}},
	}
	for _, tt := range tests {
		for _, writes := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, writes %t", tt.name, writes), func(t *testing.T) {
				s := schedtest.NewScheduler(t, cpusched.WithQueueLimit(1))
				var calls int
				var gotStatus int
				var gotErr error
				var retryAfter, loadHeader string
				logger, _ := logBuffer()
				h := Handler(s, loopOrPanic{}, WithMaxQueueWait(time.Second), WithLoadMetricsHeader(), WithLogger(logger),
					WithRetryAfter(2*time.Second), WithRequestTaskOptions(niceFromQuery),
					WithErrorHandler(func(w http.ResponseWriter, r *http.Request, status int, err error) {
						calls++
						gotStatus, gotErr = status, err
						retryAfter, loadHeader = w.Header().Get("Retry-After"), w.Header().Get(loadMetricsHeader)
						if writes {
							w.Header().Set("Content-Type", "application/json")
							w.WriteHeader(status)
							fmt.Fprintf(w, `{"status":%d}`, status)
						}
					}))
				rec := tt.do(t, s, h)
				if calls != 1 || gotStatus != tt.wantStatus || !tt.wantErr(gotErr) {
					t.Errorf("got %d calls, the last with %d and %v; want 1 with %d and the cause", calls, gotStatus, gotErr, tt.wantStatus)
				}
				wantRetry := ""
				if tt.wantStatus == http.StatusServiceUnavailable {
					wantRetry = "2"
				}
				if retryAfter != wantRetry || loadHeader == "" {
					t.Errorf("headers when the function ran: got Retry-After %q and %s %q, want %q and a load report", retryAfter, loadMetricsHeader, loadHeader, wantRetry)
				}
				wantBody := ""
				if writes {
					wantBody = fmt.Sprintf(`{"status":%d}`, tt.wantStatus)
				}
				if rec.Code != tt.wantStatus || rec.Body.String() != wantBody {
					t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body, tt.wantStatus, wantBody)
				}
				if got := Sheds(s); got != tt.wantSheds {
					t.Errorf("got Sheds %+v, want %+v", got, tt.wantSheds)
				}
				if st, _ := RouteStatsOf(h); st.Shed != tt.wantSheds {
					t.Errorf("got RouteStats.Shed %+v, want %+v", st.Shed, tt.wantSheds)
				}
			})
		}
	}
}

// niceFromQuery returns the nice level of the request's query parameter
// nice, if any, whatever its range.
func niceFromQuery(r *http.Request) ([]cpusched.TaskOption, error) {
	if !r.URL.Query().Has("nice") {
		return nil, nil
	}
	nice, err := strconv.Atoi(r.URL.Query().Get("nice"))
	return []cpusched.TaskOption{cpusched.WithNice(nice)}, err
}

// is returns a function that reports whether an error is target.
func is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

// loopOrPanic is a handler: a request to /loop calls Checkpoint until it
// fails, one to /panic panics, any other answers "ok".
type loopOrPanic struct{}

func (loopOrPanic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/loop":
		for TaskFrom(r.Context()).Checkpoint() == nil {
		}
	case "/panic":
		panic("handler panics")
	default:
		io.WriteString(w, "ok")
	}
}

func TestShedsPerScheduler(t *testing.T) {
	// The handlers of one scheduler count together in Sheds, another
	// scheduler's, or one without handlers, apart; each handler counts
	// its own in RouteStats.Shed.
	s1, s2 := schedtest.NewScheduler(t), schedtest.NewScheduler(t)
	if got := Sheds(s1); got != (ShedCounts{}) {
		t.Errorf("no handler yet: got %+v, want zeros", got)
	}
	bad := WithRequestTaskOptions(niceFromQuery)
	handlers := []http.Handler{Handler(s1, new(ok), bad), Handler(s1, new(ok), bad), Handler(s2, new(ok), bad)}
	for i, h := range handlers {
		for range i + 1 {
			serve(h, httptest.NewRequest("GET", "/?nice=99", nil))
		}
	}
	if got1, got2 := Sheds(s1), Sheds(s2); got1.BadOptions != 3 || got2.BadOptions != 3 {
		t.Errorf("got BadOptions %d and %d, want 3 (two handlers of one scheduler, 1 and 2) and 3", got1.BadOptions, got2.BadOptions)
	}
	for i, h := range handlers {
		if st, _ := RouteStatsOf(h); st.Shed != (ShedCounts{BadOptions: uint64(i + 1)}) {
			t.Errorf("handler %d: got RouteStats.Shed %+v, want BadOptions %d alone", i, st.Shed, i+1)
		}
	}
}
