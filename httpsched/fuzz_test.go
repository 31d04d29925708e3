package httpsched

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/schedtest"
)

// What FuzzHandler's handler does, by the input's behaviour byte.
const (
	behaveOK          = iota // answers 200 "ok"
	behaveCheckpoints        // calls Checkpoint, then answers 200 (503 if one fails)
	behavePanic              // panics before the response
	behaveAbort              // panics with http.ErrAbortHandler
	behavePanicLate          // writes, then panics
	behaveBlocking           // a Blocking call, then 200
	behaveEchoBody           // 200 with the body's length, 400 if it is empty
	numBehaviours
)

// When FuzzHandler cancels the request's context, by the input's cancel byte.
const (
	cancelNever       = iota
	cancelBefore      // before ServeHTTP
	cancelWhileQueued // while the task waits behind another for the one slot
	cancelInHandler   // inside the handler, which then sees Checkpoint fail
	numCancelPoints
)

// fuzzRequest is one FuzzHandler input's request and the handler's
// bookkeeping.
type fuzzRequest struct {
	behaviour, cancelAt, checkpoints uint8
	cancel                           context.CancelFunc
	opts                             []cpusched.TaskOption
	called                           bool
}

// fuzzRequestKey is the request context's key of its *fuzzRequest.
type fuzzRequestKey struct{}

// fuzzBehaviour is FuzzHandler's handler: it does what the request's
// fuzzRequest says.
func fuzzBehaviour(w http.ResponseWriter, r *http.Request) {
	fr := r.Context().Value(fuzzRequestKey{}).(*fuzzRequest)
	fr.called = true
	task := TaskFrom(r.Context())
	if fr.cancelAt == cancelInHandler {
		fr.cancel()
		<-r.Context().Done()
		// Checkpoint sees the cancellation a few microseconds later.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			if err := task.Checkpoint(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		return // 200 with no body: FuzzHandler reports it
	}
	switch fr.behaviour {
	case behaveCheckpoints:
		for range fr.checkpoints {
			if err := task.Checkpoint(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
	case behavePanic:
		panic("fuzz panic")
	case behaveAbort:
		panic(http.ErrAbortHandler)
	case behavePanicLate:
		io.WriteString(w, "partial")
		panic("fuzz panic after the response started")
	case behaveBlocking:
		task.Blocking(func() { time.Sleep(time.Microsecond) })
	case behaveEchoBody:
		n, _ := io.Copy(io.Discard, r.Body)
		if n == 0 {
			http.Error(w, "body: empty", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, n)
		return
	}
	io.WriteString(w, "ok")
}

// fuzzTaskOptions returns the task options an input gives, in or out of
// range: class, nice, group and slice, each only if its bit of given is set.
func fuzzTaskOptions(given uint8, class, nice int, group string, sliceNs int64) []cpusched.TaskOption {
	var opts []cpusched.TaskOption
	if given&1 != 0 {
		opts = append(opts, cpusched.WithClass(cpusched.Class(class)))
	}
	if given&2 != 0 {
		opts = append(opts, cpusched.WithNice(nice))
	}
	if given&4 != 0 {
		opts = append(opts, cpusched.WithGroup(group))
	}
	if given&8 != 0 {
		opts = append(opts, cpusched.WithTaskSlice(time.Duration(sliceNs)))
	}
	return opts
}

// FuzzHandler sends requests of random shapes (method, path, a header, a
// body) through Handler, with random task options from
// WithRequestTaskOptions (out of range too), a handler that answers, loops
// on Checkpoint, panics or reads the body, and the request's context
// cancelled at random points. Each answer must be the documented one: 400
// for invalid task options, 503 with Retry-After for a request cancelled
// before its task started, 500 for a panic, a panic with
// http.ErrAbortHandler (and no other) for a panic with it or after the
// response started, the handler's own answer otherwise; and after each
// request the scheduler is idle with its Stats identity intact.
func FuzzHandler(f *testing.F) {
	f.Add("GET", "/", "Accept", "*/*", []byte(nil), uint8(0), 0, 0, "", int64(0), uint8(behaveOK), uint8(cancelNever), uint8(0), false)
	f.Add("POST", "/echo", "Content-Type", "text/plain", []byte("hello"), uint8(15), 2, -5, "g", int64(time.Millisecond), uint8(behaveEchoBody), uint8(cancelNever), uint8(0), true)
	f.Add("GET", "/cp", "", "", []byte(nil), uint8(3), 3, 19, "", int64(0), uint8(behaveCheckpoints), uint8(cancelNever), uint8(20), false)
	f.Add("GET", "/bad-class", "", "", []byte(nil), uint8(1), 4, 0, "", int64(0), uint8(behaveOK), uint8(cancelNever), uint8(0), false)
	f.Add("GET", "/bad-nice", "", "", []byte(nil), uint8(2), 0, 20, "", int64(0), uint8(behaveOK), uint8(cancelBefore), uint8(0), false)
	f.Add("GET", "/bad-slice", "", "", []byte(nil), uint8(8), 0, 0, "", int64(49*time.Microsecond), uint8(behaveOK), uint8(cancelNever), uint8(0), true)
	f.Add("PUT", "/panic", "X-A", "b", []byte("x"), uint8(0), 0, 0, "", int64(0), uint8(behavePanic), uint8(cancelNever), uint8(0), true)
	f.Add("GET", "/abort", "", "", []byte(nil), uint8(0), 0, 0, "", int64(0), uint8(behaveAbort), uint8(cancelNever), uint8(0), false)
	f.Add("GET", "/late", "", "", []byte(nil), uint8(0), 0, 0, "", int64(0), uint8(behavePanicLate), uint8(cancelNever), uint8(0), false)
	f.Add("GET", "/queued", "", "", []byte(nil), uint8(4), 0, 0, "tenant", int64(0), uint8(behaveOK), uint8(cancelWhileQueued), uint8(0), true)
	f.Add("GET", "/in-handler", "", "", []byte(nil), uint8(0), 0, 0, "", int64(0), uint8(behaveCheckpoints), uint8(cancelInHandler), uint8(1), false)
	f.Add("GET", "/blocking", "", "", []byte(nil), uint8(0), 0, 0, "", int64(0), uint8(behaveBlocking), uint8(cancelNever), uint8(0), false)

	s := schedtest.NewScheduler(f)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	taskOpts := WithRequestTaskOptions(func(r *http.Request) ([]cpusched.TaskOption, error) {
		return r.Context().Value(fuzzRequestKey{}).(*fuzzRequest).opts, nil
	})
	plain := Handler(s, http.HandlerFunc(fuzzBehaviour), taskOpts, WithLogger(logger), WithRetryAfter(2*time.Second))
	shedding := Handler(s, http.HandlerFunc(fuzzBehaviour), taskOpts, WithLogger(logger), WithRetryAfter(2*time.Second), WithMaxQueueWait(time.Millisecond))

	f.Fuzz(func(t *testing.T, method, target, headerName, headerValue string, body []byte,
		given uint8, class, nice int, group string, sliceNs int64, behaviour, cancelAt, checkpoints uint8, shed bool) {
		fr := &fuzzRequest{behaviour: behaviour % numBehaviours, cancelAt: cancelAt % numCancelPoints, checkpoints: checkpoints % 64,
			opts: fuzzTaskOptions(given, class, nice, group, sliceNs)}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		fr.cancel = cancel
		r, err := http.NewRequestWithContext(context.WithValue(ctx, fuzzRequestKey{}, fr), method, "/", bytes.NewReader(body))
		if err != nil {
			return // not a method token: net/http answers 400 before any handler
		}
		if u, err := url.ParseRequestURI(target); err == nil {
			r.URL, r.RequestURI = u, target
		}
		r.Header[headerName] = []string{headerValue}
		h := plain
		if shed {
			h = shedding
		}

		if fr.cancelAt == cancelBefore {
			cancel()
		}
		release, served := func() {}, make(chan struct{})
		if fr.cancelAt == cancelWhileQueued {
			release = schedtest.HoldSlot(t, s)
			go cancelOnceQueued(s, cancel, served)
		}
		rec, panicked := servePanic(h, r)
		close(served)
		release()

		optsErr := cpusched.CheckTaskOptions(fr.opts...)
		var want int // 0: the handler's own answer
		switch {
		case optsErr != nil:
			want = http.StatusBadRequest // before the request is admitted or scheduled
		case fr.cancelAt == cancelBefore || fr.cancelAt == cancelWhileQueued:
			want = http.StatusServiceUnavailable
			if rec.Header().Get("Retry-After") != "2" {
				t.Errorf("got Retry-After %q on a request cancelled before its task started, want 2", rec.Header().Get("Retry-After"))
			}
		}
		if want != 0 && (fr.called || rec.Code != want || panicked != nil) {
			t.Fatalf("options %v (%v), cancel point %d: got %d %q, panic %v, handler called %v; want %d without calling it",
				fr.opts, optsErr, fr.cancelAt, rec.Code, rec.Body, panicked, fr.called, want)
		}
		if want == 0 {
			checkHandlerAnswer(t, fr, len(body), rec, panicked)
		}
		st := s.Stats()
		sum := st.Completed + st.Failed + st.Canceled + st.Panicked + uint64(st.Queued) + uint64(st.Started)
		if st.Submitted != sum || st.Queued != 0 || st.Started != 0 {
			t.Fatalf("after the request: Submitted %d, Completed+Failed+Canceled+Panicked+Queued+Started %d, Queued %d, Started %d; want equal, 0, 0",
				st.Submitted, sum, st.Queued, st.Started)
		}
	})
}

// checkHandlerAnswer checks the answer to a request whose task ran fuzzBehaviour.
func checkHandlerAnswer(t *testing.T, fr *fuzzRequest, bodyLen int, rec *httptest.ResponseRecorder, panicked any) {
	t.Helper()
	wantCode, wantBody, wantPanic := http.StatusOK, "ok", any(nil)
	switch {
	case fr.cancelAt == cancelInHandler:
		wantCode, wantBody = http.StatusServiceUnavailable, context.Canceled.Error()+"\n"
	case fr.behaviour == behavePanic:
		wantCode, wantBody = http.StatusInternalServerError, http.StatusText(http.StatusInternalServerError)+"\n"
	case fr.behaviour == behaveAbort:
		wantBody, wantPanic = "", http.ErrAbortHandler
	case fr.behaviour == behavePanicLate:
		wantBody, wantPanic = "partial", http.ErrAbortHandler
	case fr.behaviour == behaveEchoBody && bodyLen == 0:
		wantCode, wantBody = http.StatusBadRequest, "body: empty\n"
	case fr.behaviour == behaveEchoBody:
		wantBody = strconv.Itoa(bodyLen)
	}
	if !fr.called || rec.Code != wantCode || rec.Body.String() != wantBody || panicked != wantPanic {
		t.Fatalf("behaviour %d, cancel point %d: got %d %q, panic %v, handler called %v; want %d %q, panic %v",
			fr.behaviour, fr.cancelAt, rec.Code, rec.Body, panicked, fr.called, wantCode, wantBody, wantPanic)
	}
}

// cancelOnceQueued calls cancel once a task is queued in s, unless served
// is closed first.
func cancelOnceQueued(s *cpusched.Scheduler, cancel context.CancelFunc, served <-chan struct{}) {
	for s.Stats().Queued == 0 {
		select {
		case <-served:
			return
		case <-time.After(10 * time.Microsecond):
		}
	}
	cancel()
}
