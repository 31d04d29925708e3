// The child processes: the demo server the probe and the heavy clients
// talk to, the auto server (the same routes but the scheduled ones, the
// whole mux wrapped in httpsched.Auto), and the floor's server of the
// same heavy routes with every thread SCHED_IDLE.

package libcalls

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"

	"github.com/cpusched/cpusched/cmd/internal/hogproc"
)

// The server's routes. KIND is one of Kinds.
const (
	pathFast   = "/fast"    // the probe's: a 1 ms sleep, as the bench's /delay1ms
	pathDirect = "/direct/" // + KIND: the call on the handler's goroutine
	pathSched  = "/sched/"  // + KIND: the same handler through httpsched (not on the floor's or the auto server)
	pathStats  = "/stats"   // a Count
	pathCalls  = "/calls"   // ?from=S&to=S: a Calls
)

// fastSleep is how long the probe's handler sleeps.
const fastSleep = time.Millisecond

// ServeConfig is one server process.
type ServeConfig struct {
	Addr string // listen address; loopback
	Cost int    // bcrypt cost, MinCost..MaxCost
	// Floor makes it the floor's server: every thread SCHED_IDLE before
	// it listens, the heavy routes direct only, and no Scheduler.
	Floor bool
	// Auto makes it the auto server: the heavy routes direct only, and
	// the whole mux served through httpsched.Auto over its Scheduler, no
	// route marked by hand. Not with Floor.
	Auto bool
}

// Hello is a server's first line on stdout.
type Hello struct {
	Addr       string `json:"addr,omitempty"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	// Isolation, Workers and ThreadsRaisable are its Scheduler's (not the
	// floor's, which has none).
	Isolation       string `json:"isolation,omitempty"`
	Workers         int    `json:"workers,omitempty"`
	ThreadsRaisable bool   `json:"threads_raisable,omitempty"`
	// IdleThreads is how many threads the floor's server made SCHED_IDLE.
	IdleThreads int `json:"idle_threads,omitempty"`
	// Error is why it could not serve; NoSchedIdle is set when that is
	// hogproc.ErrNoSchedIdle (no floor on this machine).
	Error       string `json:"error,omitempty"`
	NoSchedIdle bool   `json:"no_sched_idle,omitempty"`
}

// Count is a server's answer to /stats: counters since it started, at its
// own uptime, the clock of the windows the parent asks /calls about.
type Count struct {
	UptimeS   float64          `json:"uptime_s"`
	Completed map[string]int64 `json:"completed"` // heavy calls completed, by kind, direct and scheduled together
	InFlight  int64            `json:"in_flight"` // heavy requests in the server now, queued ones included
	// ContendedS is the Scheduler's Stats.ContendedTime, in seconds: the
	// time ospriority ran its tasks at normal priority because other
	// processes kept the CPUs busy.
	ContendedS float64 `json:"contended_s"`
	// Routes is what httpsched.Auto made of the auto server's routes
	// (httpsched.AutoRoutesOf); the other servers have none.
	Routes []AutoRoute `json:"routes,omitempty"`
}

// AutoRoute is one route of the auto server as httpsched.Auto classified
// it.
type AutoRoute struct {
	Route string `json:"route"` // its ServeMux pattern
	// Heavy is true while its requests run as tasks.
	Heavy bool `json:"heavy"`
	// CPUMs is Auto's moving average of CPU per sampled request, ms.
	CPUMs    float64 `json:"cpu_ms"`
	Requests uint64  `json:"requests"`
	Sampled  uint64  `json:"sampled"`
	Moves    uint64  `json:"moves"` // between heavy and light
}

// Calls is a server's answer to /calls?from=S&to=S: by kind, the calls
// that ran in the window [from, to] of its uptime, each credited with the
// share of its run (from the call's start to its end) that fell in the
// window.
//
// Why not the calls completed in the window: the calls share the CPUs, so
// those started together end together, in bursts of up to a client per
// kind; a window that takes one burst more or less is off by a whole
// burst, a large share of what a window holds. A call's run, from the
// library's entry to its return, advances about evenly (the runtime and
// the kernel share the CPUs in slices of milliseconds), so the credit
// moves smoothly with the window's ends. Ask once the calls have ended
// (the parent waits for InFlight 0): a call still running is not counted.
type Calls struct {
	Credit map[string]float64 `json:"credit"`
}

// call is one heavy call's run, in seconds of the server's uptime.
type call struct {
	kind       string
	start, end float64
}

// server is one server process's handlers and counters.
type server struct {
	started   time.Time
	work      worker
	sched     *cpusched.Scheduler // nil on the floor's server
	auto      http.Handler        // httpsched.Auto's handler, on the auto server only
	completed map[string]*atomic.Int64
	inFlight  atomic.Int64

	mu    sync.Mutex
	calls []call // every call that ended, in the order they ended
}

// Serve runs a server on cfg.Addr until ctx ends, after writing its Hello
// and a newline to stdout. It is what `cpusched lab-child libcalls serve`
// runs. The floor's server that cannot make its threads SCHED_IDLE writes
// a Hello with NoSchedIdle set and returns an error wrapping
// hogproc.ErrNoSchedIdle. Serve returns nil after a clean shutdown.
func Serve(ctx context.Context, cfg ServeConfig, stdout io.Writer) error {
	if cfg.Cost < MinCost || cfg.Cost > MaxCost {
		return fmt.Errorf("-cost must be in %d..%d, got %d", MinCost, MaxCost, cfg.Cost)
	}
	if cfg.Floor && cfg.Auto {
		return errors.New("-floor and -auto exclude each other: the floor's server has no Scheduler")
	}
	s := &server{started: time.Now(), work: worker{payload: Payload(), cost: cfg.Cost}, completed: map[string]*atomic.Int64{}}
	for _, k := range Kinds {
		s.completed[k] = new(atomic.Int64)
	}
	enc := json.NewEncoder(stdout)
	hello := Hello{GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if cfg.Floor {
		n, err := hogproc.LowerAll()
		if err != nil {
			_ = enc.Encode(Hello{Error: err.Error(), NoSchedIdle: errors.Is(err, hogproc.ErrNoSchedIdle)})
			return err
		}
		hello.IdleThreads = n
	} else {
		var err error
		if s.sched, err = cpusched.New(); err != nil {
			return err
		}
		defer s.sched.Close(context.Background())
		st := s.sched.Stats()
		hello.Isolation, hello.Workers, hello.ThreadsRaisable = st.Isolation.String(), st.Workers, st.ThreadsRaisable
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	hello.Addr = ln.Addr().String()
	if err := enc.Encode(hello); err != nil {
		return err
	}
	srv := &http.Server{Handler: s.routes(cfg.Auto), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// A heavy call in progress ends within a second; the clients are gone.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-served
	return nil
}

// routes returns the server's handler: each heavy route's handler is built
// once, the scheduled ones with httpsched.Handler over the same handler as
// the direct ones. The auto server's (auto) has no scheduled routes and
// its one ServeMux is wrapped whole in httpsched.Auto, as a user would, in
// one line; its count of heavy requests in flight wraps Auto from outside,
// as a metrics middleware would, so that it counts the requests Auto
// queues.
func (s *server) routes(auto bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+pathFast, fast)
	mux.HandleFunc("GET "+pathStats, s.stats)
	mux.HandleFunc("GET "+pathCalls, s.credit)
	for _, kind := range Kinds {
		h := s.heavy(kind)
		if auto {
			mux.Handle("GET "+pathDirect+kind, h)
			continue
		}
		mux.Handle("GET "+pathDirect+kind, s.track(h))
		if s.sched != nil {
			mux.Handle("GET "+pathSched+kind, s.track(httpsched.Handler(s.sched, h)))
		}
	}
	if !auto {
		return mux
	}
	s.auto = httpsched.Auto(s.sched, mux)
	tracked := s.track(s.auto)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, pathDirect) {
			tracked.ServeHTTP(w, r)
			return
		}
		s.auto.ServeHTTP(w, r)
	})
}

// fast sleeps fastSleep as the bench's probe does: a timer on another
// goroutine that wakes the handler, so that each request wakes two
// goroutines, the pattern CPU-heavy work delays. It always waits for the
// sleeper, so nothing outlives the request.
func fast(w http.ResponseWriter, r *http.Request) {
	woke := make(chan bool, 1)
	go func() {
		t := time.NewTimer(fastSleep)
		defer t.Stop()
		select {
		case <-t.C:
			woke <- true
		case <-r.Context().Done():
			woke <- false
		}
	}()
	if <-woke {
		io.WriteString(w, "slept 1ms\n")
	}
}

// heavy returns the handler of kind's call: no Checkpoint anywhere in it,
// as a service that calls a library cannot place one.
func (s *server) heavy(kind string) http.Handler {
	count := s.completed[kind]
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		start := s.uptime()
		line, err := s.work.do(kind)
		end := s.uptime()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		s.mu.Lock()
		s.calls = append(s.calls, call{kind: kind, start: start, end: end})
		s.mu.Unlock()
		count.Add(1)
		io.WriteString(w, line)
	})
}

func (s *server) uptime() float64 { return time.Since(s.started).Seconds() }

// track counts the requests to h in flight, from before httpsched queues
// them to after they end, so that the parent can wait for the server to go
// quiet between steps.
func (s *server) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		h.ServeHTTP(w, r)
	})
}

func (s *server) stats(w http.ResponseWriter, _ *http.Request) {
	c := Count{UptimeS: s.uptime(), Completed: map[string]int64{}, InFlight: s.inFlight.Load()}
	for k, n := range s.completed {
		c.Completed[k] = n.Load()
	}
	if s.sched != nil {
		c.ContendedS = s.sched.Stats().ContendedTime.Seconds()
	}
	if routes, ok := httpsched.AutoRoutesOf(s.auto); ok {
		for _, r := range routes {
			c.Routes = append(c.Routes, AutoRoute{Route: r.Route, Heavy: r.Heavy, CPUMs: float64(r.CPU) / float64(time.Millisecond),
				Requests: r.Requests, Sampled: r.Sampled, Moves: r.Moves})
		}
	}
	writeJSON(w, c)
}

// credit answers /calls?from=S&to=S.
func (s *server) credit(w http.ResponseWriter, r *http.Request) {
	from, errFrom := strconv.ParseFloat(r.FormValue("from"), 64)
	to, errTo := strconv.ParseFloat(r.FormValue("to"), 64)
	if errFrom != nil || errTo != nil || !(from < to) {
		http.Error(w, fmt.Sprintf("want from and to, seconds of uptime with from < to; got from=%q to=%q", r.FormValue("from"), r.FormValue("to")), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	c := creditCalls(s.calls, from, to)
	s.mu.Unlock()
	writeJSON(w, c)
}

// creditCalls credits each call with the share of its run inside [from,
// to] (the whole call if it took no measurable time and ended inside).
func creditCalls(calls []call, from, to float64) Calls {
	c := Calls{Credit: map[string]float64{}}
	for _, k := range Kinds {
		c.Credit[k] = 0
	}
	for _, cl := range calls {
		if cl.end < from || cl.start > to {
			continue
		}
		if run := cl.end - cl.start; run > 0 {
			c.Credit[cl.kind] += (min(cl.end, to) - max(cl.start, from)) / run
		} else {
			c.Credit[cl.kind]++
		}
	}
	return c
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
