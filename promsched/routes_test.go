package promsched

import (
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/autoroute"
	"github.com/cpusched/cpusched/internal/routesched"
	"github.com/cpusched/cpusched/internal/schedtest"
	"github.com/cpusched/cpusched/internal/servetest"
)

func TestRoutes(t *testing.T) {
	// Two Auto wrappers of s: the first names every request "GET /x", the
	// second by its path. GET /x is one series with the requests of both.
	s := schedtest.NewScheduler(t)
	empty := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	first := httpsched.Auto(s, empty, httpsched.WithRouteOf(func(*http.Request) string { return "GET /x" }))
	second := httpsched.Auto(s, empty, httpsched.WithRouteOf(func(r *http.Request) string { return "GET " + r.URL.Path }))
	for _, rq := range []struct {
		h    http.Handler
		path string
	}{{first, "/"}, {first, "/"}, {first, "/"}, {second, "/x"}, {second, "/x"}, {second, "/y"}} {
		servetest.Record(rq.h, "GET", rq.path)
	}
	const want = `
# HELP cpusched_route_heavy 1 while an Auto wrapper runs the route's requests as tasks, else 0.
# TYPE cpusched_route_heavy gauge
cpusched_route_heavy{route="GET /x"} 0
cpusched_route_heavy{route="GET /y"} 0
# HELP cpusched_route_moves_total Times a route of an Auto wrapper moved between heavy (tasks) and light (direct).
# TYPE cpusched_route_moves_total counter
cpusched_route_moves_total{route="GET /x"} 0
cpusched_route_moves_total{route="GET /y"} 0
# HELP cpusched_route_requests_total Requests of a route of an Auto wrapper, as tasks or directly.
# TYPE cpusched_route_requests_total counter
cpusched_route_requests_total{route="GET /x"} 5
cpusched_route_requests_total{route="GET /y"} 1
`
	if err := testutil.CollectAndCompare(NewCollector(s), strings.NewReader(want),
		"cpusched_route_heavy", "cpusched_route_moves_total", "cpusched_route_requests_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(NewCollector(s), "cpusched_route_cpu_seconds"); got != 2 {
		t.Errorf("cpusched_route_cpu_seconds: %d series, want 2", got)
	}
	runtime.KeepAlive(first)
	runtime.KeepAlive(second)
}

// heavyAuto returns a scheduler and an Auto of it with opts, over a mux
// of GET /heavy, which Spins for 3 ms, and GET /light, which answers at
// once, once three requests to /heavy have made it heavy. Without thread
// CPU clocks every route stays light, and it skips the test.
func heavyAuto(t *testing.T, opts ...httpsched.Option) (*cpusched.Scheduler, http.Handler) {
	t.Helper()
	if !autoroute.Measurable() {
		t.Skip("no thread CPU clocks: every route stays light")
	}
	s := schedtest.NewScheduler(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /heavy", func(http.ResponseWriter, *http.Request) { servetest.Spin(3 * time.Millisecond) })
	mux.HandleFunc("GET /light", func(http.ResponseWriter, *http.Request) {})
	h := httpsched.Auto(s, mux, opts...)
	for range 3 {
		servetest.Record(h, "GET", "/heavy")
	}
	return s, h
}

func TestRouteHeavy(t *testing.T) {
	s, h := heavyAuto(t)
	families := gather(t, s)
	heavy, cpu := find(families, "cpusched_route_heavy", "GET /heavy"), find(families, "cpusched_route_cpu_seconds", "GET /heavy")
	if heavy == nil || cpu == nil || value(heavy) != 1 || value(cpu) < autoroute.DefaultThreshold.Seconds() {
		t.Errorf("GET /heavy: heavy %v, CPU %v; want 1 and at least the threshold", heavy, cpu)
	}
	runtime.KeepAlive(h)
}

func TestMergeRoutes(t *testing.T) {
	ms := time.Millisecond
	got := mergeRoutes([]httpsched.AutoRoute{
		{Route: "a", Requests: 5}, // not sampled: no average
		{Route: "a", CPU: 4 * ms, Requests: 30, Sampled: 6, Moves: 1, Heavy: true},
		{Route: "b", CPU: ms, Requests: 2, Sampled: 2},
		{Route: "a", CPU: ms, Requests: 10, Sampled: 4},
		{Route: "a", Requests: 5},
	})
	want := []httpsched.AutoRoute{
		{Route: "a", CPU: 3250 * time.Microsecond, Requests: 50, Sampled: 10, Moves: 1, Heavy: true},
		{Route: "b", CPU: ms, Requests: 2, Sampled: 2},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestMetricsDocumented checks that the package comment's table lists
// every metric the collector describes.
func TestMetricsDocumented(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "promsched.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	name := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for _, d := range NewCollector(schedtest.NewScheduler(t)).(*collector).descs() {
		m := name.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		if !regexp.MustCompile(`(?m)^\t` + m[1] + ` `).MatchString(doc) {
			t.Errorf("%s is not in the package comment's table", m[1])
		}
	}
}

// refuseBad is a WithRequestTaskOptions that refuses the task options of
// a request with the query parameter bad: a 400, shed for bad options.
var refuseBad = httpsched.WithRequestTaskOptions(func(r *http.Request) ([]cpusched.TaskOption, error) {
	if r.URL.Query().Has("bad") {
		return nil, errors.New("bad")
	}
	return nil, nil
})

// quiet is a WithLogger that drops the 400s' log lines.
var quiet = httpsched.WithLogger(slog.New(slog.DiscardHandler))

// heldCall is a call of the Middleware routes of TestRouteStats: if
// running is set, its handler signals that it runs and waits for release.
type heldCall struct{ running, release chan struct{} }

func runHeldCall(c heldCall, w http.ResponseWriter, r *http.Request) {
	if c.running != nil {
		close(c.running)
		<-c.release
	}
}

// routeShedHelp opens the exposition of cpusched_route_shed_total.
const routeShedHelp = `
# HELP cpusched_route_shed_total Requests the route's httpsched handler answered without running them, by reason: queue_full, wait_limit (WithMaxQueueWait), closed (503), bad_options (400).
# TYPE cpusched_route_shed_total counter
`

// routeSheds returns the exposition lines of route's
// cpusched_route_shed_total: bad requests shed for bad options,
// waitLimit at the wait limit, none for the other reasons.
func routeSheds(route string, bad, waitLimit int) string {
	return fmt.Sprintf(`cpusched_route_shed_total{reason="bad_options",route=%[1]q} %[2]d
cpusched_route_shed_total{reason="closed",route=%[1]q} 0
cpusched_route_shed_total{reason="queue_full",route=%[1]q} 0
cpusched_route_shed_total{reason="wait_limit",route=%[1]q} %[3]d
`, route, bad, waitLimit)
}

func TestRouteStats(t *testing.T) {
	// The routes of two Middleware of s (through routesched, as
	// echosched's and ginsched's are), each with figures of its own, one
	// slot: GET /a/:id holds it with one request, GET /c has four queued
	// behind it, at WithMaxQueueWait's cold limit of 4, and sheds a
	// fifth; GET /a/:id, POST /a/:id and GET /b shed 1, 2 and 3 requests
	// for bad options. A route's figures on another's series, a series
	// per request path (/a/1), or a limit for GET /b, whose Middleware
	// has no WithMaxQueueWait, fail.
	s := schedtest.NewScheduler(t)
	limited, err := routesched.New(s, runHeldCall, []httpsched.Option{httpsched.WithMaxQueueWait(time.Hour), refuseBad, quiet})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := routesched.New(s, runHeldCall, []httpsched.Option{refuseBad, quiet})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(rs *routesched.Routes[heldCall], method, route, url string, c heldCall) int {
		rec := httptest.NewRecorder()
		rs.Serve(method, route, c, rec, httptest.NewRequest(method, url, nil))
		return rec.Code
	}
	held := heldCall{make(chan struct{}), make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() { serve(limited, "GET", "/a/:id", "/a/1", held) })
	<-held.running
	for range 4 {
		wg.Go(func() { serve(limited, "GET", "/c", "/c", heldCall{}) })
	}
	schedtest.WaitQueued(t, s, 4)
	if code := serve(limited, "GET", "/c", "/c", heldCall{}); code != http.StatusServiceUnavailable {
		t.Errorf("GET /c past the limit: got %d, want 503", code)
	}
	for _, rq := range []struct {
		rs            *routesched.Routes[heldCall]
		method, route string
		bad           int
	}{{limited, "GET", "/a/:id", 1}, {limited, "POST", "/a/:id", 2}, {plain, "GET", "/b", 3}} {
		for range rq.bad {
			if code := serve(rq.rs, rq.method, rq.route, "/a/1?bad", heldCall{}); code != http.StatusBadRequest {
				t.Errorf("%s %s?bad: got %d, want 400", rq.method, rq.route, code)
			}
		}
	}

	const limits = `
# HELP cpusched_route_in_flight Requests WithMaxQueueWait's limit of the route's httpsched handler has admitted that have not ended.
# TYPE cpusched_route_in_flight gauge
cpusched_route_in_flight{route="GET /a/:id"} 1
cpusched_route_in_flight{route="GET /c"} 4
cpusched_route_in_flight{route="POST /a/:id"} 0
# HELP cpusched_route_wait_limit WithMaxQueueWait's limit of the route's httpsched handler now: its requests admitted at once.
# TYPE cpusched_route_wait_limit gauge
cpusched_route_wait_limit{route="GET /a/:id"} 4
cpusched_route_wait_limit{route="GET /c"} 4
cpusched_route_wait_limit{route="POST /a/:id"} 4
`
	sheds := routeShedHelp + routeSheds("GET /a/:id", 1, 0) + routeSheds("GET /b", 3, 0) +
		routeSheds("GET /c", 0, 1) + routeSheds("POST /a/:id", 2, 0)
	if err := testutil.CollectAndCompare(NewCollector(s), strings.NewReader(limits+sheds),
		"cpusched_route_wait_limit", "cpusched_route_in_flight", "cpusched_route_shed_total"); err != nil {
		t.Error(err)
	}
	close(held.release)
	wg.Wait()
	// Timing sets the overruns' values, not their series: one per route.
	for _, name := range []string{"cpusched_route_overrun_seconds", "cpusched_route_overrun_wait_seconds_total"} {
		if got := testutil.CollectAndCount(NewCollector(s), name); got != 4 {
			t.Errorf("%s: %d series, want 4, one per route", name, got)
		}
	}
	if got := testutil.CollectAndCount(NewCollector(s), "cpusched_route_in_flight"); got != 3 {
		t.Errorf("cpusched_route_in_flight once every request ended: %d series, want 3", got)
	}
	if m := find(gather(t, s), "cpusched_route_in_flight", "GET /c"); m == nil || value(m) != 0 {
		t.Errorf("GET /c once every request ended: in flight %v, want 0", m)
	}
	runtime.KeepAlive(limited) // their routes are s's while they live
	runtime.KeepAlive(plain)
}

func TestRouteStatsAuto(t *testing.T) {
	// An Auto route has figures once it is heavy: GET /heavy sheds 2
	// requests for bad options, and a Middleware route named alike 1,
	// one series of 3; GET /light, served directly, has none.
	s, h := heavyAuto(t, refuseBad, quiet)
	servetest.Record(h, "GET", "/light")
	if r := servetest.AutoRoute(t, s, "GET /heavy"); !r.Heavy {
		t.Fatalf("GET /heavy: %+v, want heavy", r)
	}
	for _, path := range []string{"/heavy?bad", "/heavy?bad", "/light?bad"} {
		servetest.Record(h, "GET", path)
	}
	mw, err := routesched.New(s, runHeldCall, []httpsched.Option{refuseBad, quiet})
	if err != nil {
		t.Fatal(err)
	}
	mw.Serve("GET", "/heavy", heldCall{}, httptest.NewRecorder(), httptest.NewRequest("GET", "/heavy?bad", nil))

	want := routeShedHelp + routeSheds("GET /heavy", 3, 0)
	if err := testutil.CollectAndCompare(NewCollector(s), strings.NewReader(want), "cpusched_route_shed_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(NewCollector(s), "cpusched_route_wait_limit"); got != 0 {
		t.Errorf("cpusched_route_wait_limit without WithMaxQueueWait: %d series, want none", got)
	}
	runtime.KeepAlive(h)
	runtime.KeepAlive(mw)
}

func TestRouteStatsMerge(t *testing.T) {
	// Only the Auto routes that have been heavy; a Middleware's route and
	// Auto's named alike added up.
	ms := time.Millisecond
	got := routeStats([]httpsched.AutoRoute{
		{Route: "light", Requests: 9, Stats: httpsched.RouteStats{}},
		{Route: "was heavy", Moves: 2, Stats: httpsched.RouteStats{Limit: 3, Overrun: ms}},
		{Route: "both", Heavy: true, Moves: 1, Stats: httpsched.RouteStats{Limit: 2, InFlight: 1, Shed: httpsched.ShedCounts{WaitLimit: 4}}},
		{Route: "both", Heavy: true, Moves: 1, Stats: httpsched.RouteStats{Overrun: 2 * ms, Shed: httpsched.ShedCounts{Closed: 1}}},
	}, map[string]httpsched.RouteStats{
		"both":       {Limit: 5, OverrunWait: ms, Shed: httpsched.ShedCounts{WaitLimit: 1}},
		"middleware": {Shed: httpsched.ShedCounts{BadOptions: 1}},
	})
	want := map[string]httpsched.RouteStats{
		"was heavy":  {Limit: 3, Overrun: ms},
		"both":       {Limit: 7, InFlight: 1, Overrun: 2 * ms, OverrunWait: ms, Shed: httpsched.ShedCounts{WaitLimit: 5, Closed: 1}},
		"middleware": {Shed: httpsched.ShedCounts{BadOptions: 1}},
	}
	if !maps.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestRouteCountersOutliveWrappers: a route's counters never go back when
// the wrapper that counted them is dropped and collected while the
// scheduler lives (a router rebuilt on a reload), an Auto wrapper's
// requests and a Middleware's sheds alike, and the next wrapper's counts
// add to them. Regression: the series came from the live wrappers alone,
// so they went back to nothing, which Prometheus reads as a counter reset.
// The wrappers must still be collected: the ledger holds their counts,
// not them.
func TestRouteCountersOutliveWrappers(t *testing.T) {
	s := schedtest.NewScheduler(t)
	empty := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	routeX := httpsched.WithRouteOf(func(*http.Request) string { return "GET /x" })
	// router makes a router's wrappers, an Auto that names every request
	// GET /x and a Middleware, and serves requests through the first and
	// bad ones (shed, 400) to GET /p through the second.
	router := func(requests, bad int) (http.Handler, *routesched.Routes[heldCall]) {
		a := httpsched.Auto(s, empty, routeX)
		for range requests {
			servetest.Record(a, "GET", "/")
		}
		mw, err := routesched.New(s, runHeldCall, []httpsched.Option{refuseBad, quiet})
		if err != nil {
			t.Fatal(err)
		}
		for range bad {
			mw.Serve("GET", "/p", heldCall{}, httptest.NewRecorder(), httptest.NewRequest("GET", "/p?bad", nil))
		}
		return a, mw
	}
	check := func(when string, requests, shed float64) {
		t.Helper()
		families := gather(t, s)
		if m := find(families, "cpusched_route_requests_total", "GET /x"); m == nil || value(m) != requests {
			t.Errorf("%s: cpusched_route_requests_total{route=\"GET /x\"} = %v, want %v", when, m, requests)
		}
		var got float64
		for _, f := range families {
			if f.GetName() != "cpusched_route_shed_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				if m.GetLabel()[1].GetValue() == "GET /p" && m.GetLabel()[0].GetValue() == "bad_options" {
					got = value(m)
				}
			}
		}
		if got != shed {
			t.Errorf("%s: cpusched_route_shed_total{route=\"GET /p\",reason=\"bad_options\"} = %v, want %v", when, got, shed)
		}
	}
	func() { // the first router: its wrappers are garbage once it returns
		a, mw := router(3, 2)
		check("with the first wrappers", 3, 2)
		runtime.KeepAlive(a)
		runtime.KeepAlive(mw)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(httpsched.AutoRoutes(s)) > 0 || len(routesched.AllStats(s)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the dropped wrappers were not collected in 10 s: something holds them")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	check("once they are collected", 3, 2)
	b, mw := router(1, 1)
	check("with the next wrappers", 4, 3)
	runtime.KeepAlive(b)
	runtime.KeepAlive(mw)
}
