// Package demo is cpusched's demo HTTP server: cpuworker's endpoints (a 1 ms
// delay and CRC32 checksums run directly or through the scheduler) plus
// /stats and /debug/pprof, for `cpusched serve` and the benchmark.
//
// Endpoints (GET or HEAD; other methods get 405 with an Allow header, unknown
// paths 404, bad parameters 400 with a one-line reason, and a path not in
// canonical form, such as //delay or /a/../delay, 307 to the clean path, as
// net/http's ServeMux answers):
//
//	/delay?d=1ms     sleep d (1us..10s) on a goroutine the handler waits for,
//	                 then build a response buffer of Config.Garbage bytes
//	                 and answer its CRC32 (the fast route)
//	/delay1ms        the same with d=1ms (cpuworker's path)
//	/checksum?n=N&sched=0|1&checkpoint=0|1&class=C&nice=K&group=G
//	                 N CRC32 passes (1..1000000, default a random
//	                 10000..20000) over a 256 KiB buffer, on the handler
//	                 goroutine (sched=0, default) or as a cpusched task with
//	                 a Checkpoint after every pass (sched=1, through
//	                 httpsched: 503 with Retry-After once the scheduler is
//	                 closed); checkpoint=0 runs a task's passes straight
//	                 through with no Checkpoint, as a library call that
//	                 cannot yield would (direct passes call
//	                 Checkpoint too, a no-op but in Auto's tasks);
//	                 the task options class, nice and group apply
//	                 to sched=1 (Config.Groups weights groups and counts
//	                 their passes); a sched=1 answer carries the task's
//	                 Task.Waited in its Cpusched-Waited-Ns header
//	/checksumWithoutCpuWorker        = /checksum?sched=0 (cpuworker's path)
//	/checksumWithCpuWorker           = /checksum?sched=1 (cpuworker's path)
//	/checksumSmallTaskWithCpuWorker  = /checksum?sched=1&n=10 (cpuworker's path)
//	/stats           JSON: see Stats
//	/metrics         Prometheus metrics: promsched's, the Go runtime's, the process's
//	/debug/pprof/    net/http/pprof, on this server's own mux
//
// With Config.Auto (`cpusched serve -auto`) the whole mux is served
// through httpsched.Auto, and no route is marked by hand: Auto measures
// the CPU of each route's requests (a route is its mux pattern, so
// /checksum is one route whatever its parameters) and runs the requests
// of the routes it finds heavy as tasks. /checksum then ignores sched:
// sched=1 is served as sched=0, since its passes would otherwise run as a
// task inside Auto's task, and Auto, not the client, decides whether a
// request runs as one. The passes run on the handler goroutine, with a
// Checkpoint after every pass unless checkpoint=0 (a no-op while the
// route is light: the handler has no task then); class, nice and group
// apply to the requests Auto runs as tasks, and such an answer carries
// Cpusched-Waited-Ns. /stats lists Auto's routes (Stats.AutoRoutes).
package demo

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/pprof"
	"net/url"
	"runtime"
	"runtime/trace"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
)

// Limits and sizes of the endpoints, as their 400 errors quote them.
const (
	// BufferSize is the size of the buffer one CRC32 pass reads: 256 KiB,
	// as cpuworker.
	BufferSize = 256 << 10
	// MinPasses and MaxPasses bound /checksum's n.
	MinPasses = 1
	MaxPasses = 1_000_000
	// DefaultMinPasses and DefaultMaxPasses bound the random n /checksum
	// uses when none is given (cpuworker's 10,000-20,000).
	DefaultMinPasses = 10_000
	DefaultMaxPasses = 20_000
	// SmallTaskPasses is the n of /checksumSmallTaskWithCpuWorker.
	SmallTaskPasses = 10
	// MinDelay and MaxDelay bound /delay's d.
	MinDelay = time.Microsecond
	MaxDelay = 10 * time.Second
	// MaxGroupLen bounds /checksum's group, in bytes: cpusched.WithGroup's
	// limit, checked here so that a long name is a 400, not a refused task.
	MaxGroupLen = 256
)

// Config configures a Server. The zero value is the library's defaults.
type Config struct {
	// Isolation is the scheduler's isolation mode. The zero value is
	// cpusched.IsolationReserve; `cpusched serve` passes
	// cpusched.DefaultIsolation() unless told otherwise.
	Isolation cpusched.Isolation
	// Workers is the number of worker slots (cpusched.WithWorkers gives
	// the range); 0 lets the isolation mode choose.
	Workers int
	// Slice is the scheduler's time slice (cpusched.WithSlice gives the
	// range); 0 lets the isolation mode choose.
	Slice time.Duration
	// Garbage is the size in bytes of the response buffer every fast
	// request (/delay, /delay1ms) builds, fills and leaves to the collector
	// (0..MaxGarbage); when it is not 0 the CRC32 work, direct and as
	// tasks, also allocates TaskGarbage bytes every TaskGarbageEvery
	// passes. The zero value makes no garbage at all (the clean room);
	// `cpusched serve` defaults to DefaultGarbage, and its -gc is
	// HeavyGarbage.
	Garbage int
	// Logger receives the scheduler's own events (cpusched.WithLogger);
	// nil is silence.
	Logger *slog.Logger
	// Groups are groups to track, by name, with their weights
	// (cpusched.SetGroupWeight, MinGroupWeight..MaxGroupWeight), set
	// before the server serves: /checksum?group=NAME's tasks share the
	// slots by them, and Stats.PassesByGroup counts each one's passes.
	// nil tracks none.
	Groups map[string]int
	// Auto serves the whole mux through httpsched.Auto with the server's
	// scheduler (see the package comment): the routes whose requests use
	// httpsched.DefaultHeavyThreshold of CPU or more run as tasks. false
	// serves the mux as it is, /checksum's sched choosing.
	Auto bool
}

// Server holds the demo's scheduler, buffer and counters. Its handler is
// safe for concurrent use. Close it to stop the scheduler.
type Server struct {
	cfg   Config
	sched *cpusched.Scheduler
	buf   []byte // read-only after NewServer: CRC32 input
	mux   *http.ServeMux
	// handler is what the server serves: mux, or with Config.Auto mux
	// wrapped in httpsched.Auto.
	handler http.Handler
	started time.Time
	// scheduled serves the checksum requests that run as tasks
	// (httpsched.Handler over checksumScheduled).
	scheduled http.Handler

	passesDirect atomic.Uint64
	passesSched  atomic.Uint64
	// probeSeq numbers the /delay requests served while a runtime/trace is
	// recorded (see ProbeTaskType).
	probeSeq atomic.Uint64
	// requests counts requests per route; the map is filled in NewServer and
	// only read afterwards.
	requests map[string]*atomic.Uint64
	// groupPasses counts the scheduled passes of each group of
	// Config.Groups; filled in NewServer and only read afterwards.
	groupPasses map[string]*atomic.Uint64
}

// NewServer returns a Server with a new scheduler configured by cfg. On an
// out-of-range field it returns an error naming the field and its range,
// and starts nothing.
func NewServer(cfg Config) (*Server, error) {
	if err := CheckGarbage(cfg.Garbage); err != nil {
		return nil, fmt.Errorf("demo: Garbage %w", err)
	}
	opts := []cpusched.Option{cpusched.WithIsolation(cfg.Isolation), cpusched.WithLogger(cfg.Logger)}
	if cfg.Slice != 0 {
		opts = append(opts, cpusched.WithSlice(cfg.Slice))
	}
	if cfg.Workers != 0 {
		opts = append(opts, cpusched.WithWorkers(cfg.Workers)) // New's error names the range
	}
	sched, err := cpusched.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	s := &Server{
		cfg:      cfg,
		sched:    sched,
		buf:      make([]byte, BufferSize),
		mux:      http.NewServeMux(),
		started:  time.Now(),
		requests: make(map[string]*atomic.Uint64),
	}
	if err := s.setGroups(cfg.Groups); err != nil {
		sched.Close(context.Background()) // no task has run: returns at once
		return nil, err
	}
	// Fixed seed: the same n gives the same CRC on every run.
	rand.NewChaCha8([32]byte{}).Read(s.buf)
	s.scheduled = httpsched.Handler(sched, http.HandlerFunc(s.checksumScheduled),
		httpsched.WithRequestTaskOptions(func(r *http.Request) ([]cpusched.TaskOption, error) {
			return checksumParamsFrom(r.Context()).opts, nil
		}))

	s.route("/delay", s.handleDelay)
	s.route("/delay1ms", func(w http.ResponseWriter, r *http.Request) { s.delay(w, r, time.Millisecond) })
	s.route("/checksum", func(w http.ResponseWriter, r *http.Request) { s.checksum(w, r, 0, false) })
	s.route("/checksumWithoutCpuWorker", func(w http.ResponseWriter, r *http.Request) { s.checksum(w, r, 0, false) })
	s.route("/checksumWithCpuWorker", func(w http.ResponseWriter, r *http.Request) { s.checksum(w, r, 0, true) })
	s.route("/checksumSmallTaskWithCpuWorker", func(w http.ResponseWriter, r *http.Request) {
		s.checksum(w, r, SmallTaskPasses, true)
	})
	s.route("/stats", s.handleStats)
	s.route("/metrics", s.metricsHandler())
	// pprof.Index serves every profile under the prefix by name.
	s.routeAs("/debug/pprof/", "/debug/pprof/", pprof.Index)
	s.routeAs("/debug/pprof/cmdline", "/debug/pprof/", pprof.Cmdline)
	s.routeAs("/debug/pprof/profile", "/debug/pprof/", pprof.Profile)
	s.routeAs("/debug/pprof/symbol", "/debug/pprof/", pprof.Symbol)
	s.routeAs("/debug/pprof/trace", "/debug/pprof/", pprof.Trace)
	s.handler = s.mux
	if cfg.Auto {
		// A bad class, nice or group gives no options here, so that the
		// request reaches checksum, whose 400 names the parameter.
		s.handler = httpsched.Auto(sched, s.mux, httpsched.WithRequestTaskOptions(func(r *http.Request) ([]cpusched.TaskOption, error) {
			opts, _, param, _ := parseTaskOptions(r.URL.Query())
			if param != "" {
				return nil, nil
			}
			return opts, nil
		}))
	}
	return s, nil
}

// route registers h for GET (and so HEAD) on path, counted under path.
func (s *Server) route(path string, h http.HandlerFunc) { s.routeAs(path, path, h) }

// routeAs registers h for GET (and so HEAD) on path, counted under name.
// The mux answers other methods on path with 405 and an Allow header, and
// paths nobody registered with 404.
func (s *Server) routeAs(path, name string, h http.HandlerFunc) {
	n, ok := s.requests[name]
	if !ok {
		n = new(atomic.Uint64)
		s.requests[name] = n
	}
	s.mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	})
}

// Handler returns the server's HTTP handler: with Config.Auto, the one
// httpsched.Auto made.
func (s *Server) Handler() http.Handler { return s.handler }

// Close closes the scheduler (see cpusched.Scheduler.Close): running tasks
// go on until they end or ctx ends, and are then cancelled. Requests that
// come later and want the scheduler get 503. It returns nil if every task
// ended on its own, ctx's error otherwise.
func (s *Server) Close(ctx context.Context) error { return s.sched.Close(ctx) }

// badRequest answers 400 with a one-line reason that names the parameter.
func badRequest(w http.ResponseWriter, param, format string, args ...any) {
	http.Error(w, param+": "+fmt.Sprintf(format, args...), http.StatusBadRequest)
}

func (s *Server) handleDelay(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("d") {
		s.delay(w, r, time.Millisecond)
		return
	}
	d, err := time.ParseDuration(q.Get("d"))
	if err != nil || d < MinDelay || d > MaxDelay {
		badRequest(w, "d", "must be a duration in 1us..10s (e.g. 1ms), got %q", q.Get("d"))
		return
	}
	s.delay(w, r, d)
}

// delay sleeps d as cpuworker's /delay1ms does: a goroutine hand-off, so
// that every request wakes a sleeping goroutine and then the handler, the
// pattern whose latency CPU-heavy work hurts. The handler always waits for
// the sleeper, so no goroutine outlives the request.
func (s *Server) delay(w http.ResponseWriter, r *http.Request, d time.Duration) {
	ctx := r.Context()
	if trace.IsEnabled() {
		var end func()
		ctx, end = s.traceProbe(ctx, w)
		defer end()
	}
	woke := make(chan bool, 1)
	go func() {
		// A timer rather than time.Sleep, so that the sleeper ends with the
		// request (client gone, server stopping) instead of outliving it.
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
			woke <- true
		case <-ctx.Done():
			timer.Stop()
			woke <- false
		}
	}()
	if !<-woke {
		return // nobody is listening any more
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	line := fmt.Sprintf("delayed %v\n", d)
	if s.cfg.Garbage > 0 {
		// One length per d and Garbage: ab counts a change as a failure.
		line = fmt.Sprintf("delayed %v, built %d bytes, crc %08x\n", d, s.cfg.Garbage, buildResponse(s.cfg.Garbage, line))
	}
	io.WriteString(w, line)
}

// Marks of the /delay requests in a runtime/trace (one is recorded while
// /debug/pprof/trace runs): each request is a trace task of type
// ProbeTaskType on the handler goroutine, with a log entry of category
// ProbeSeqCategory holding its sequence number, which the response also
// carries in its ProbeSeqHeader header, so that a client can match its own
// latency of a request to the request's events in the trace
// (internal/tailtrace does).
const (
	ProbeTaskType    = "demo.probe"
	ProbeSeqCategory = "seq"
	ProbeSeqHeader   = "Demo-Probe-Seq"
)

// traceProbe makes the request a trace task and numbers it; the caller
// must call end when the handler returns.
func (s *Server) traceProbe(ctx context.Context, w http.ResponseWriter) (context.Context, func()) {
	ctx, task := trace.NewTask(ctx, ProbeTaskType)
	seq := strconv.FormatUint(s.probeSeq.Add(1), 10)
	trace.Log(ctx, ProbeSeqCategory, seq)
	w.Header().Set(ProbeSeqHeader, seq)
	return ctx, task.End
}

// checksumParams are /checksum's parsed query parameters.
type checksumParams struct {
	passes int
	sched  bool
	// checkpoint: a task's passes each end with a Checkpoint (checkpoint=1,
	// the default).
	checkpoint bool
	group      string // the task's group, "" for none
	opts       []cpusched.TaskOption
}

// parseBit reads the 0|1 parameter name of q: def when it is absent, and
// ok false when it is neither 0 nor 1.
func parseBit(q url.Values, name string, def bool) (v, ok bool) {
	if !q.Has(name) {
		return def, true
	}
	switch q.Get(name) {
	case "0":
		return false, true
	case "1":
		return true, true
	}
	return def, false
}

// parseChecksum parses r's query; defaultPasses 0 means a random count in
// DefaultMinPasses..DefaultMaxPasses. On a bad parameter it returns the
// parameter's name and the reason.
func parseChecksum(r *http.Request, defaultPasses int, defaultSched bool) (p checksumParams, param, reason string) {
	q := r.URL.Query()
	p.passes, p.sched = defaultPasses, defaultSched
	if p.passes == 0 {
		p.passes = DefaultMinPasses + rand.IntN(DefaultMaxPasses-DefaultMinPasses+1)
	}
	if q.Has("n") {
		n, err := strconv.Atoi(q.Get("n"))
		if err != nil || n < MinPasses || n > MaxPasses {
			return p, "n", fmt.Sprintf("must be an integer in %d..%d, got %q", MinPasses, MaxPasses, q.Get("n"))
		}
		p.passes = n
	}
	var ok bool
	if p.sched, ok = parseBit(q, "sched", p.sched); !ok {
		return p, "sched", fmt.Sprintf("must be 0 (run on the handler goroutine) or 1 (run as a cpusched task), got %q", q.Get("sched"))
	}
	if p.checkpoint, ok = parseBit(q, "checkpoint", true); !ok {
		return p, "checkpoint", fmt.Sprintf("must be 0 (a task's passes without Checkpoint) or 1 (a Checkpoint after every pass), got %q", q.Get("checkpoint"))
	}
	p.opts, p.group, param, reason = parseTaskOptions(q)
	return p, param, reason
}

// parseTaskOptions parses the task options of q: class, nice and group.
// On a bad one it returns its name and the reason.
func parseTaskOptions(q url.Values) (opts []cpusched.TaskOption, group, param, reason string) {
	if q.Has("class") {
		c, err := cpusched.ParseClass(q.Get("class"))
		if err != nil {
			return nil, "", "class", err.Error()
		}
		opts = append(opts, cpusched.WithClass(c))
	}
	if q.Has("nice") {
		n, err := strconv.Atoi(q.Get("nice"))
		if err != nil || n < cpusched.MinNice || n > cpusched.MaxNice {
			return nil, "", "nice", fmt.Sprintf("must be an integer in %d..%d, got %q", cpusched.MinNice, cpusched.MaxNice, q.Get("nice"))
		}
		opts = append(opts, cpusched.WithNice(n))
	}
	if q.Has("group") {
		if g := q.Get("group"); len(g) > MaxGroupLen {
			return nil, "", "group", fmt.Sprintf("must be at most %d bytes, got %d", MaxGroupLen, len(g))
		}
		group = q.Get("group")
		opts = append(opts, cpusched.WithGroup(group))
	}
	return opts, group, "", ""
}

// checksum runs the CRC32 passes and answers
// {"passes":N,"crc":"xxxxxxxx","sched":B}. Responses of one endpoint have one
// length (ab counts a change of length as a failed request). With sched=1 the
// passes run as a task through httpsched, which answers 503 when the
// scheduler is closed or its queue full, and 500 if the task panicked. With
// Config.Auto every request takes the direct path, sched=1 too (B is then
// false), and runs as a task where Auto found the route heavy.
func (s *Server) checksum(w http.ResponseWriter, r *http.Request, defaultPasses int, defaultSched bool) {
	p, param, reason := parseChecksum(r, defaultPasses, defaultSched)
	if param != "" {
		badRequest(w, param, "%s", reason)
		return
	}
	if s.cfg.Auto {
		p.sched = false
	}
	if p.sched {
		s.scheduled.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), checksumParamsKey{}, &p)))
		return
	}
	task := httpsched.TaskFrom(r.Context()) // nil but under Auto, on a heavy route
	var group *atomic.Uint64
	if task != nil {
		group = s.groupCounter(p.group) // the group is the task's (Auto's request options)
	}
	done, crc, err := s.checksumDirect(r.Context(), task, p.passes, p.checkpoint, group)
	if task != nil {
		w.Header().Set(WaitedHeader, strconv.FormatInt(int64(task.Waited()), 10))
	}
	writeChecksum(w, p, done, crc, err)
}

// checksumParamsKey is the request context's key of the *checksumParams
// that checksum parsed for checksumScheduled.
type checksumParamsKey struct{}

// checksumParamsFrom returns the parameters checksum put in ctx.
func checksumParamsFrom(ctx context.Context) *checksumParams {
	return ctx.Value(checksumParamsKey{}).(*checksumParams)
}

// checksumScheduled is the handler httpsched runs as a task, for requests
// that checksum parsed.
func (s *Server) checksumScheduled(w http.ResponseWriter, r *http.Request) {
	p := checksumParamsFrom(r.Context())
	task := httpsched.TaskFrom(r.Context())
	done, crc, err := s.checksumTask(task, p.passes, p.checkpoint, s.groupCounter(p.group))
	// The task ends right after this handler: its wait so far is all the
	// queueing delay the scheduler added (cpusched bench reads it).
	w.Header().Set(WaitedHeader, strconv.FormatInt(int64(task.Waited()), 10))
	writeChecksum(w, *p, done, crc, err)
}

// WaitedHeader is the response header of a scheduled /checksum request
// that carries its task's Task.Waited, in nanoseconds: the time it waited
// for a worker slot, first and after each time it gave the slot up.
const WaitedHeader = "Cpusched-Waited-Ns"

// writeChecksum answers the outcome of p's passes: the JSON, or 503 if they
// stopped early (the client is gone or the server stops).
func writeChecksum(w http.ResponseWriter, p checksumParams, done int, crc uint32, err error) {
	if err != nil {
		http.Error(w, fmt.Sprintf("stopped after %d of %d passes: %v", done, p.passes, err), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"passes\":%d,\"crc\":\"%08x\",\"sched\":%t}\n", done, crc, p.sched)
}

// checksumDirect runs n passes on the calling goroutine, stopping early if
// ctx ends (the client is gone or the server stops). t is the task the
// goroutine runs as (httpsched.TaskFrom: Auto's, on a heavy route), or nil:
// with checkpoint set, every pass but the last ends with t.Checkpoint, as
// a handler written for Auto does, and an error from it stops the passes.
// A nil t's Checkpoint returns nil at once (BenchmarkChecksumDirect
// measures the loop with and without it). The passes count as the
// scheduler's where t is not nil, and in group too (nil: none).
func (s *Server) checksumDirect(ctx context.Context, t *cpusched.Task, n int, checkpoint bool, group *atomic.Uint64) (done int, crc uint32, err error) {
	counter := &s.passesDirect
	if t != nil {
		counter = &s.passesSched
	}
	cancelled := ctx.Done()
	for done < n {
		crc = crc32.Update(crc, crc32.IEEETable, s.buf)
		done++
		s.passDone(counter, done)
		if group != nil {
			group.Add(1)
		}
		if done == n {
			break
		}
		select {
		case <-cancelled:
			return done, crc, ctx.Err()
		default:
		}
		if checkpoint {
			if err := t.Checkpoint(); err != nil {
				return done, crc, err
			}
		}
	}
	return done, crc, nil
}

// checksumTask runs n passes as task t, with a Checkpoint between passes
// if checkpoint is set, else straight through: such a task keeps its slot
// (in IsolationOSPriority, its thread) until it ends. Each pass also
// counts in group, the counter of the task's group (nil: none).
func (s *Server) checksumTask(t *cpusched.Task, n int, checkpoint bool, group *atomic.Uint64) (done int, crc uint32, err error) {
	for done < n {
		crc = crc32.Update(crc, crc32.IEEETable, s.buf)
		done++
		s.passDone(&s.passesSched, done)
		if group != nil {
			group.Add(1)
		}
		if checkpoint && done < n {
			if err := t.Checkpoint(); err != nil {
				return done, crc, err
			}
		}
	}
	return done, crc, nil
}

// gomaxprocs reports GOMAXPROCS without changing it.
func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
