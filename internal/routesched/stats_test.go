package routesched

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/schedtest"
	"github.com/cpusched/cpusched/internal/servetest"
)

// blockCall is a call that, if release is set, signals that it runs and
// waits for release.
type blockCall struct{ running, release chan struct{} }

func runBlockCall(c blockCall, w http.ResponseWriter, r *http.Request) {
	if c.release != nil {
		close(c.running)
		<-c.release
	}
}

// mustNew returns New's Routes, and fails the test on its error.
func mustNew[C any](t *testing.T, s *cpusched.Scheduler, run func(C, http.ResponseWriter, *http.Request), opts []httpsched.Option) *Routes[C] {
	t.Helper()
	rs, err := New(s, run, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestStats(t *testing.T) {
	// Each route by its name with its own handler's figures, while one
	// request is in flight: a route's figures under another's name, a
	// route no request reached, or another adapter's route would fail.
	s := schedtest.NewScheduler(t)
	limited := []httpsched.Option{httpsched.WithMaxQueueWait(time.Hour)}
	a := mustNew(t, s, runBlockCall, limited)
	b := mustNew(t, s, runBlockCall, limited)
	plain := mustNew(t, s, runBlockCall, nil)
	type otherCall struct{}
	other := mustNew(t, s, func(otherCall, http.ResponseWriter, *http.Request) {}, nil)
	serve := func(rs *Routes[blockCall], method, path string, c blockCall) {
		rs.Serve(method, path, c, httptest.NewRecorder(), httptest.NewRequest(method, path, nil))
	}
	serve(a, "GET", "/shared", blockCall{})
	serve(b, "GET", "/shared", blockCall{})
	serve(plain, "POST", "/busy", blockCall{})
	serve(plain, "BREW", "/pot", blockCall{})
	other.Serve("GET", "/other", otherCall{}, httptest.NewRecorder(), httptest.NewRequest("GET", "/other", nil))
	call := blockCall{make(chan struct{}), make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		serve(a, "GET", "/busy", call)
	}()
	<-call.running

	// One slot: WithMaxQueueWait's limit is 4 until its first request
	// ends (cold), then 2 (1, the slots, grown by one).
	want := map[string]httpsched.RouteStats{
		"GET /busy":   {Limit: 4, InFlight: 1},
		"GET /shared": {Limit: 4}, // a's and b's, added up
		"POST /busy":  {},
		"/pot":        {}, // a method not net/http's is none
	}
	servetest.CheckRouteStats(t, "in flight", Stats[blockCall](s), want)
	close(call.release)
	<-done
	want["GET /busy"] = httpsched.RouteStats{Limit: 2}
	servetest.CheckRouteStats(t, "ended", Stats[blockCall](s), want)
	servetest.CheckRouteStats(t, "the other call type's", Stats[otherCall](s), map[string]httpsched.RouteStats{"GET /other": {}})

	// Routes no longer in use leave.
	a, b = nil, nil
	runtime.GC()
	servetest.CheckRouteStats(t, "after a and b are dropped", Stats[blockCall](s), map[string]httpsched.RouteStats{"POST /busy": {}, "/pot": {}})
	runtime.KeepAlive(plain)
}

func TestStatsOfNoRoutes(t *testing.T) {
	s := schedtest.NewScheduler(t)
	if got := Stats[blockCall](s); got == nil || len(got) != 0 {
		t.Errorf("got %v, want an empty map", got)
	}
	if got := AllStats(s); got == nil || len(got) != 0 {
		t.Errorf("AllStats: got %v, want an empty map", got)
	}
}

// refuseBad refuses the task options of a request with the query
// parameter bad: a 400, shed for bad options.
func refuseBad(r *http.Request) ([]cpusched.TaskOption, error) {
	if r.URL.Query().Has("bad") {
		return nil, errors.New("bad")
	}
	return nil, nil
}

func TestAllStats(t *testing.T) {
	// Each route's sheds by its name, the routes of two call types (two
	// adapters) together, a route both have added up: sheds counted on
	// another route, or one call type's routes left out, fail.
	s := schedtest.NewScheduler(t)
	type otherCall struct{}
	opts := []httpsched.Option{httpsched.WithRequestTaskOptions(refuseBad), httpsched.WithLogger(slog.New(slog.DiscardHandler))}
	block := mustNew(t, s, runBlockCall, opts)
	other := mustNew(t, s, func(otherCall, http.ResponseWriter, *http.Request) {}, opts)
	for _, rq := range []struct {
		block        bool
		method, path string
		bad          int
	}{
		{true, "GET", "/a", 1}, {true, "POST", "/a", 2}, {false, "GET", "/a", 4}, {false, "GET", "/b", 0},
	} {
		for i := range max(rq.bad, 1) {
			url := rq.path
			if i < rq.bad {
				url += "?bad"
			}
			r, w := httptest.NewRequest(rq.method, url, nil), httptest.NewRecorder()
			if rq.block {
				block.Serve(rq.method, rq.path, blockCall{}, w, r)
			} else {
				other.Serve(rq.method, rq.path, otherCall{}, w, r)
			}
		}
	}
	bad := func(n uint64) httpsched.RouteStats {
		return httpsched.RouteStats{Shed: httpsched.ShedCounts{BadOptions: n}}
	}
	servetest.CheckRouteStats(t, "AllStats", AllStats(s), map[string]httpsched.RouteStats{
		"GET /a": bad(5), "POST /a": bad(2), "GET /b": {},
	})
	servetest.CheckRouteStats(t, "Stats of one call type", Stats[blockCall](s), map[string]httpsched.RouteStats{
		"GET /a": bad(1), "POST /a": bad(2),
	})
}

func TestAdd(t *testing.T) {
	ms := time.Millisecond
	a := httpsched.RouteStats{Overrun: 3 * ms, Limit: 2, InFlight: 1, OverrunWait: ms,
		Shed: httpsched.ShedCounts{QueueFull: 1, WaitLimit: 2, Closed: 3, BadOptions: 4}}
	b := httpsched.RouteStats{Overrun: 2 * ms, Limit: 3, InFlight: 2, OverrunWait: 2 * ms,
		Shed: httpsched.ShedCounts{QueueFull: 10, WaitLimit: 20, Closed: 30, BadOptions: 40}}
	want := httpsched.RouteStats{Overrun: 3 * ms, Limit: 5, InFlight: 3, OverrunWait: 3 * ms,
		Shed: httpsched.ShedCounts{QueueFull: 11, WaitLimit: 22, Closed: 33, BadOptions: 44}}
	if got := Add(a, b); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := Add(b, a); got != want {
		t.Errorf("the other way: got %+v, want %+v", got, want)
	}
}
