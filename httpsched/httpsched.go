// Package httpsched runs net/http handlers as cpusched tasks, and sheds load
// with 503 when the scheduler's queue is full or its wait too long.
//
// Wrap the CPU-heavy routes; their handlers call Checkpoint in their loops:
//
//	s, err := cpusched.New()
//	if err != nil {
//		return err
//	}
//	defer s.Close(context.Background())
//	mux.Handle("GET /hash", httpsched.Handler(s, http.HandlerFunc(hash),
//		httpsched.WithTaskOptions(cpusched.WithNice(5)),
//		httpsched.WithMaxQueueWait(100*time.Millisecond))) // else 503
//
//	func hash(w http.ResponseWriter, r *http.Request) {
//		task := httpsched.TaskFrom(r.Context())
//		for _, block := range blocks {
//			digest.Write(block)
//			if err := task.Checkpoint(); err != nil { // yields when the slice ends
//				return // the client is gone, or Close cut the task: 503
//			}
//		}
//		...
//	}
package httpsched

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/admission"
	"github.com/cpusched/cpusched/internal/loadreport"
	"github.com/cpusched/cpusched/internal/routeledger"
)

// handler is what Handler returns.
type handler struct {
	sched *cpusched.Scheduler
	next  http.Handler
	cfg   config
	limit *admission.Groups[cpusched.TaskPlace] // nil without WithMaxQueueWait; a limit per place of the requests
	place cpusched.TaskPlace                    // the place of WithTaskOptions' options
	// meter is s's, shared with every adapter of s: each request's end
	// goes into the load reports (WithLoadMetricsHeader, grpcsched's,
	// promsched's), whether this handler sends them or not.
	meter *loadreport.Meter
	sheds *sheds // s's, shared with its other handlers
	// counts are this handler's, for RouteStats: the requests it shed by
	// reason, and the part of their waits its limit did not learn from,
	// ns (overrun.go). A handler of a named route counts them in s's
	// ledger (CountAs), so that promsched's counters outlive it.
	counts *routeledger.Block
	// clock is s's overrunClock, shared with its other handlers; overrun
	// the estimate of this handler's requests' overruns (overrun.go).
	clock   *overrunClock
	overrun overrunEstimate
	// opts are the task options of a request without a route pattern:
	// the handler's own kind (cpusched.WithKind), then WithTaskOptions'.
	// A request with one takes its route's kind instead (taskOptions),
	// from routeOpts, which keeps those of up to maxRouteKinds patterns
	// (routeKinds counts them) so that a request makes none.
	opts       []cpusched.TaskOption
	routeOpts  sync.Map // pattern → []cpusched.TaskOption
	routeKinds atomic.Int32
}

// maxRouteKinds bounds the route patterns a handler keeps task options
// for: a ServeMux has as many as it has routes, and a handler usually
// serves one; past it, each request makes its own.
const maxRouteKinds = 64

// CountAs makes h count its sheds and overrun waits as the route name's,
// in its scheduler's ledger, where they outlive h (routeledger): for the
// wrappers that make a handler per route, before it serves. It is not
// part of the API: an exported method of an unexported type, which only
// this module's packages call, through an interface.
func (h *handler) CountAs(name string) {
	h.counts = routeledger.Add(routeledger.For(h.sched), h, name, routeledger.KindHandler)
}

// NewHandler returns a handler that runs each request to h as a task of s,
// as Handler says. An invalid option (WithTaskOptions' task options
// included), a nil s or a nil h makes it return an error naming it (and the
// option's valid range) and no handler.
func NewHandler(s *cpusched.Scheduler, h http.Handler, opts ...Option) (http.Handler, error) {
	cfg, err := checkConfig(s, h, opts)
	if err != nil {
		return nil, err
	}
	if len(cfg.auto.names) > 0 {
		return nil, fmt.Errorf("httpsched: %s: an option of Auto, not of a handler of one route", cfg.auto.names[0])
	}
	return newHandler(s, h, cfg), nil
}

// checkConfig returns the config of opts for s and h, or an error for a
// nil s or h, or an invalid option.
func checkConfig(s *cpusched.Scheduler, h http.Handler, opts []Option) (config, error) {
	if s == nil {
		return config{}, errors.New("httpsched: the scheduler is nil")
	}
	if h == nil {
		return config{}, errors.New("httpsched: the handler is nil")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return config{}, err
	}
	if err := cpusched.CheckTaskOptions(cfg.taskOpts...); err != nil {
		return config{}, fmt.Errorf("httpsched: WithTaskOptions: %w", err)
	}
	return cfg, nil
}

// newHandler returns the handler of s, h and cfg, which NewHandler or
// NewAuto has checked.
func newHandler(s *cpusched.Scheduler, h http.Handler, cfg config) *handler {
	hd := &handler{sched: s, next: h, cfg: cfg, meter: loadreport.For(s), sheds: shedsFor(s), counts: new(routeledger.Block), clock: overrunClockFor(s)}
	hd.place, _ = cpusched.TaskOptionsPlace(cfg.taskOpts...) // checked
	hd.opts = append([]cpusched.TaskOption{cpusched.WithKind(fmt.Sprintf("httpsched %p", hd))}, cfg.taskOpts...)
	if cfg.maxQueueWait > 0 {
		hd.limit = admission.NewGroups[cpusched.TaskPlace](cfg.maxQueueWait, s.Workers())
		// The handlers of s sample its overruns at their ends while this
		// one uses them.
		hd.clock.active.Add(1)
		runtime.AddCleanup(hd, func(c *overrunClock) { c.active.Add(-1) }, hd.clock)
	}
	return hd
}

// Handler returns a handler that runs each request to h as a task of s
// (s.Run with the request's context and the options' task options), so
// that h's CPU-heavy work waits for a worker slot and yields at Checkpoint
// instead of slowing the rest of the server. h gets a request whose context
// is the task's context (cancelled too when s.Close gives up waiting) and
// carries the task: TaskFrom(r.Context()) returns it.
//
// Answers the handler writes itself, without running h:
//   - 503 Service Unavailable with Retry-After (WithRetryAfter) when s's
//     queue is full (cpusched.ErrQueueFull), when s is closed
//     (cpusched.ErrClosed), and when as many of its requests are in flight
//     as WithMaxQueueWait's limit allows (ErrWaitLimit);
//   - 503 with Retry-After when the request's context ends while it waits
//     for a slot: the client has gone (net/http then drops the answer) or a
//     deadline passed; the task never started and nothing is left behind;
//   - 400 Bad Request when WithRequestTaskOptions' function returns an
//     error or an invalid task option (NewHandler has checked those of
//     WithTaskOptions), its cause logged at Info;
//   - 500 if s refuses the task for any other reason, logged.
//
// Their bodies are the status's text, which says nothing of the cause;
// WithErrorHandler writes them instead, given the cause.
//
// When s.Close gives up waiting and cuts a request's task (its context is
// cancelled with cause cpusched.ErrClosed and Checkpoint returns
// cpusched.ErrClosed), h may just return: if it wrote nothing (no
// WriteHeader, no Write), the handler answers 503 with Retry-After, as it
// does to the requests it sheds. What h wrote is left as it is. Either
// way the task counts as Canceled in s.Stats, not Completed.
//
// A panic in h is recovered by s: a panic with http.ErrAbortHandler panics
// again with it on the calling goroutine (net/http then aborts the
// response without logging); any other is logged with its stack
// (WithLogger) and answered with 500, or, if h had already started the
// response, aborts it by panicking with http.ErrAbortHandler. h's
// ResponseWriter is a wrapper that tracks whether the response started; it
// has Flush and Unwrap, so http.ResponseController reaches the original.
// Any other error of a task that started (h called runtime.Goexit on an
// IsolationOSPriority hand-off thread) is logged and handled as a panic.
//
// An invalid option, a nil s or a nil h is a programmer's error at setup,
// as a bad pattern for regexp.MustCompile: Handler panics with the error
// NewHandler would return. Use NewHandler to get the error instead.
//
// Each request's task is of its route's kind (cpusched.WithKind: the
// pattern of the ServeMux that routed it, or this handler's own without
// one), unless WithTaskOptions or WithRequestTaskOptions set another: the
// scheduler learns per route which requests run long without a
// Checkpoint and places them so, and the short requests of other routes
// in the same group are not taken for them.
//
// Each request counts in the load reports of s (qps, eps and the queue
// wait p99), which WithLoadMetricsHeader, grpcsched and promsched send;
// each it answers 400 or 503 without running h, in Sheds(s). Its own
// figures (its requests' overrun estimate, WithMaxQueueWait's limit, the
// requests it shed) are in RouteStatsOf(the handler).
//
// Cost, per request of an empty handler (BenchmarkHandler against
// BenchmarkDirect and BenchmarkRun; docs/performance.md#httpsched-middleware):
// about a microsecond, most of it the task's context that h
// gets (BenchmarkRunTaskContext); the rest of the middleware, the load
// report's counters included, adds a few tens of nanoseconds. A request
// that a ServeMux routed finds its route's kind in a map, a few tens of
// nanoseconds more and no allocation (BenchmarkHandlerRouted).
// WithMaxQueueWait adds a clock read, a deferred call, a few atomic
// operations and two samples of the scheduler's overruns, a short hold of
// its lock each, about 0.1 us (BenchmarkHandlerMaxQueueWait,
// BenchmarkOverrunSample); a request in a group, class or nice level
// other than the defaults adds a map lookup under the handler's lock, to
// find its limit. WithLoadMetricsHeader adds a load report
// and its formatting, three allocations (BenchmarkHandlerLoadMetricsHeader).
// IsolationOSPriority adds a fraction of a microsecond (h's goroutine is
// locked to its thread, which is lowered only if h computes for 250 us),
// or where a lowered thread cannot be raised back, Run's hand-off to a
// hand-off thread (microseconds).
func Handler(s *cpusched.Scheduler, h http.Handler, opts ...Option) http.Handler {
	hd, err := NewHandler(s, h, opts...)
	if err != nil {
		panic(err)
	}
	return hd
}

// taskOptions returns the task options of r's task, but for
// WithRequestTaskOptions': its kind first (cpusched.WithKind), then
// WithTaskOptions', which may set another. The kind is r's route, the
// pattern of the ServeMux that routed r (r.Pattern), else the handler's
// own: what the scheduler learns of a request's length before it runs
// (whether it is small, whether it runs past its slices without a
// Checkpoint) it learns per route, so that a route's short requests are
// not taken for another's calls that cannot yield.
func (h *handler) taskOptions(r *http.Request) []cpusched.TaskOption {
	if r.Pattern == "" {
		return h.opts
	}
	if opts, ok := h.routeOpts.Load(r.Pattern); ok {
		return opts.([]cpusched.TaskOption)
	}
	opts := make([]cpusched.TaskOption, 0, len(h.opts))
	opts = append(opts, cpusched.WithKind(r.Pattern))
	opts = append(opts, h.opts[1:]...)
	if h.routeKinds.Load() < maxRouteKinds {
		if _, loaded := h.routeOpts.LoadOrStore(r.Pattern, opts); !loaded {
			h.routeKinds.Add(1)
		}
	}
	return opts
}

// taskKey is the request context's key of the *cpusched.Task.
type taskKey struct{}

// TaskFrom returns the task that runs the request whose context is ctx (or
// a context derived from it), for Checkpoint and Blocking, or nil outside a
// handler run by Handler. A nil *cpusched.Task is safe to use (Checkpoint
// returns nil, Blocking runs its function), so one handler serves a
// scheduled route and a direct one. The task is valid until that handler
// returns; after that the scheduler reuses it, so a goroutine the handler
// started must not call its methods.
func TaskFrom(ctx context.Context) *cpusched.Task {
	t, _ := ctx.Value(taskKey{}).(*cpusched.Task)
	return t
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.meter.Arrive()
	opts, place := h.taskOptions(r), h.place
	if h.cfg.requestTaskOpts != nil {
		more, err := h.cfg.requestTaskOpts(r)
		if err == nil {
			opts = append(opts[:len(opts):len(opts)], more...)
			if h.limit != nil { // the limit is its place's
				place, err = cpusched.TaskOptionsPlace(opts...) // checks more: the rest are checked
			} else {
				err = cpusched.CheckTaskOptions(more...)
			}
		}
		if err != nil {
			h.meter.End(loadreport.Refused, 0)
			h.countShed(shedBadOptions)
			h.answer(w, r, http.StatusBadRequest, err)
			return
		}
	}
	sr := &scheduledRequest{h: h, r: r, rw: responseWriter{ResponseWriter: w}}
	if h.cfg.loadHeader {
		sr.rw.h = h
	}
	if h.limit != nil {
		var admit bool
		if sr.limit, sr.round, admit = h.limit.Admit(place); !admit {
			h.shed(w, r, shedWaitLimit, ErrWaitLimit)
			return
		}
		sr.queuedClock = h.clock.sample(h.sched)
	}
	sr.queuedAt = h.cfg.now()
	err := h.sched.Run(r.Context(), sr.run, opts...)
	switch {
	case sr.cut: // err is run's ErrClosed
		if !sr.rw.started {
			h.answer(w, r, http.StatusServiceUnavailable, err) // h wrote nothing after Close cut it
		}
	case err == nil:
		if !sr.rw.started {
			h.addLoadHeader(w) // net/http sends the headers after h returns
		}
	case !sr.started:
		h.notStarted(w, r, err, sr)
	default:
		h.failed(w, r, &sr.rw, err)
	}
}

// scheduledRequest is one request's state, in one allocation.
type scheduledRequest struct {
	h           *handler
	r           *http.Request
	rw          responseWriter
	queuedAt    time.Duration    // on h.cfg.now's clock
	limit       *admission.Limit // its place's limit, which admitted it, with WithMaxQueueWait
	round       uint64           // the limit's round it was admitted in
	queuedClock clockReading     // h.clock as it was queued, with WithMaxQueueWait
	started     bool             // run was called; read after Run returns
	cut         bool             // Close cut the task (its context's cause is ErrClosed) before h returned; read after Run returns
}

// run is the task: the handler, with the task in the request's context.
// It returns cpusched.ErrClosed if Close cut the task before h returned,
// whatever h wrote, so that the scheduler counts the task Canceled, as
// Stats says of a task Close cancelled; h itself returns nothing to tell.
func (sr *scheduledRequest) run(t *cpusched.Task) error {
	sr.started = true
	// Deferred, so that a handler that panics (or calls runtime.Goexit)
	// gives its sample and its place back too: a place never returned
	// would lower the limit for good.
	defer sr.observe(t)
	ctx := t.Context()
	sr.h.next.ServeHTTP(&sr.rw, sr.r.WithContext(context.WithValue(ctx, taskKey{}, t)))
	if errors.Is(context.Cause(ctx), cpusched.ErrClosed) {
		sr.cut = true
		return cpusched.ErrClosed
	}
	return nil
}

// observe gives the limit (if any) the request's queueing delay less the
// part its scheduler's overruns explain, and its place back; the meter
// its whole delay; and the handler's overrun estimate its overrun. It
// runs at the end of the handler, on the goroutine that runs the task
// (overrun.go).
func (sr *scheduledRequest) observe(t *cpusched.Task) {
	h := sr.h
	waited := h.cfg.waited(t)
	over := t.Overrun()
	if over > 0 || h.overrun.get() != 0 { // spare a route that yields the shared write
		h.overrun.add(over)
	}
	if h.limit != nil {
		sr.limit.Observe(waited-h.learnedApart(waited, sr, h.clock.sample(h.sched)), sr.round)
	} else if over > 0 && h.clock.active.Load() > 0 {
		h.clock.sample(h.sched) // t's overrun ends as it does: count it
	}
	h.meter.End(loadreport.Ran, waited)
}

// learnedApart returns the part of sr's wait that its limit does not learn
// from, the part overruns explain (rule 2), 0 if its route's requests
// overrun (rule 3), and counts it in RouteStats.OverrunWait.
func (h *handler) learnedApart(wait time.Duration, sr *scheduledRequest, end clockReading) time.Duration {
	if !h.overrun.yields() {
		return 0
	}
	d := overrunWait(wait, sr.queuedClock, end)
	h.counts.OverrunWait.Add(int64(d))
	return d
}

// addLoadHeader sets the load header of WithLoadMetricsHeader in w's
// headers, if the option is given.
func (h *handler) addLoadHeader(w http.ResponseWriter) {
	if h.cfg.loadHeader {
		w.Header().Set(loadMetricsHeader, formatLoadMetrics(h.meter.Report()))
	}
}

// responseWriter records whether the response has started (a final status
// or body sent), so that a panic after it aborts instead of answering 500,
// and adds the load header as it starts.
type responseWriter struct {
	http.ResponseWriter
	h       *handler // set with WithLoadMetricsHeader
	started bool
}

// start marks the response started, adding the load header first.
func (w *responseWriter) start() {
	if !w.started && w.h != nil {
		w.h.addLoadHeader(w.ResponseWriter)
	}
	w.started = true
}

func (w *responseWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols { // 1xx other than 101 are interim
		w.start()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(b)
}

// Flush sends what was written so far (http.Flusher), if the original
// ResponseWriter can.
func (w *responseWriter) Flush() { w.FlushError() }

// FlushError is Flush for http.ResponseController, which returns the
// original's error (http.ErrNotSupported if it cannot flush).
func (w *responseWriter) FlushError() error {
	w.start()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the original ResponseWriter, for http.ResponseController.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
