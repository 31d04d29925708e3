package servetest

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/autoroute"
	"github.com/cpusched/cpusched/internal/schedtest"
)

// RouteNames returns the names of s's Auto routes (httpsched.AutoRoutes),
// joined by commas.
func RouteNames(s *cpusched.Scheduler) string {
	var names []string
	for _, r := range httpsched.AutoRoutes(s) {
		names = append(names, r.Route)
	}
	return strings.Join(names, ",")
}

// AutoRoute returns the figures of s's Auto route name, and fails the
// test if s has none of that name.
func AutoRoute(t testing.TB, s *cpusched.Scheduler, name string) httpsched.AutoRoute {
	t.Helper()
	for _, r := range httpsched.AutoRoutes(s) {
		if r.Route == name {
			return r
		}
	}
	t.Fatalf("route %q not tracked: %s", name, RouteNames(s))
	return httpsched.AutoRoute{}
}

// CheckAuto checks, in each isolation mode, what an adapter's Auto
// makes of the routes of the handler that serve returns: a heavy one
// (GET /heavy, Spin for 3 ms), a light one (GET /light) and one that
// waits 5 ms and computes nothing (GET /wait/7), each answering "task" or
// "direct" as its request ran, named heavy, light and wait in s's
// routes. /heavy runs directly at first, then, heavy, as tasks; the
// others stay light and run directly. Without thread CPU clocks every
// route stays light, and it skips the test.
func CheckAuto(t *testing.T, serve func(s *cpusched.Scheduler) http.Handler, heavy, light, wait string) {
	if !autoroute.Measurable() {
		t.Skip("no thread CPU clocks: every route stays light")
	}
	for _, mode := range []cpusched.Isolation{cpusched.IsolationNone, cpusched.IsolationReserve, cpusched.IsolationOSPriority} {
		t.Run(mode.String(), func(t *testing.T) {
			s := schedtest.NewScheduler(t, cpusched.WithIsolation(mode))
			h := serve(s)
			checkAuto(t, s, h, heavy, light, wait)
			runtime.KeepAlive(h) // its routes are s's while it lives
		})
	}
}

func checkAuto(t *testing.T, s *cpusched.Scheduler, h http.Handler, heavy, light, wait string) {
	t.Helper()
	get := func(path string) string {
		rec := Record(h, "GET", path)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	var ran []string
	for range 12 {
		ran = append(ran, get("/heavy"))
		if got := get("/light"); got != "direct" {
			t.Errorf("/light ran as a %s", got)
		}
		if got := get("/wait/7"); got != "direct" {
			t.Errorf("/wait/7 ran as a %s", got)
		}
	}
	// The first sample makes /heavy heavy: its later requests are tasks.
	if ran[0] != "direct" || ran[len(ran)-1] != "task" {
		t.Errorf("/heavy ran as %v, want direct first, then tasks", ran)
	}
	// Its CPU is under its 3 ms on a busy machine: being heavy says it is
	// at least the threshold.
	if r := AutoRoute(t, s, heavy); !r.Heavy || r.Requests != 12 || r.Moves != 1 || r.Sampled < 3 {
		t.Errorf("%s: %+v, want heavy, 12 requests, 1 move, some samples inside tasks too", heavy, r)
	}
	if r := AutoRoute(t, s, wait); r.Heavy || r.CPU > time.Millisecond || r.Sampled < 4 {
		t.Errorf("%s: %+v, want light, CPU well under its 5 ms wait", wait, r)
	}
	if r := AutoRoute(t, s, light); r.Heavy || r.Requests != 12 {
		t.Errorf("%s: %+v, want light, 12 requests", light, r)
	}
}

// CheckAutoErrors checks that newAuto, an adapter's NewAuto given s and
// one bad option, or a nil scheduler and none, returns the error that
// names it (and its valid range) and no middleware (made false).
func CheckAutoErrors(t *testing.T, s *cpusched.Scheduler, newAuto func(*cpusched.Scheduler, ...httpsched.Option) (made bool, err error)) {
	t.Helper()
	for _, c := range []struct {
		opt  httpsched.Option
		want string
	}{
		{httpsched.WithHeavyThreshold(time.Microsecond), "httpsched: WithHeavyThreshold(1µs): 1µs is out of range (10µs..10s)"},
		{httpsched.WithMaxRoutes(1 << 20), "httpsched: WithMaxRoutes(1048576): 1048576 is out of range (1..65536)"},
		{httpsched.WithRouteOf(nil), "WithRouteOf(nil)"},
		{httpsched.WithRetryAfter(0), "WithRetryAfter"},
		{httpsched.WithTaskOptions(cpusched.WithNice(99)), "WithTaskOptions"},
	} {
		if made, err := newAuto(s, c.opt); made || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewAuto: got %v, want no middleware and %q", err, c.want)
		}
	}
	if made, err := newAuto(nil); made || err == nil || !strings.Contains(err.Error(), "scheduler is nil") {
		t.Errorf("NewAuto(nil): got %v, want no middleware and an error naming the scheduler", err)
	}
}

// CheckAutoRouteNames serves GET /wait/1, /wait/2, /nowhere, /nor/here,
// /light and BREW /light through the handler that serve returns, with
// Auto's options, and checks s's routes' names: want without an option;
// with WithRouteOf's, its one name; with WithMaxRoutes(1), the first
// route and httpsched.OtherRoute.
func CheckAutoRouteNames(t *testing.T, serve func(*cpusched.Scheduler, ...httpsched.Option) http.Handler, want string) {
	t.Helper()
	tests := []struct {
		opts []httpsched.Option
		want string
	}{
		{nil, want},
		{[]httpsched.Option{httpsched.WithRouteOf(func(r *http.Request) string { return "all" })}, "all"},
		{[]httpsched.Option{httpsched.WithMaxRoutes(1)}, strings.Split(want, ",")[0] + "," + httpsched.OtherRoute},
	}
	for _, tt := range tests {
		s := schedtest.NewScheduler(t)
		h := serve(s, tt.opts...)
		for _, p := range []string{"/wait/1", "/wait/2", "/nowhere", "/nor/here", "/light"} {
			Record(h, "GET", p)
		}
		Record(h, "BREW", "/light")
		if got := RouteNames(s); got != tt.want {
			t.Errorf("routes %q, want %q", got, tt.want)
		}
		runtime.KeepAlive(h)
	}
}

// CheckAutoBesideMiddleware checks the way Auto's doc gives a route a
// WithMaxQueueWait target of its own: serve returns an adapter's engine
// with GET /login behind the adapter's Middleware, registered on the
// engine itself, and GET /render in a group with the adapter's Auto, each
// answering "task" or "direct" as its request ran. /login must run as a
// task of its Middleware and never reach Auto (so never as a task inside
// Auto's), /render go through Auto, and stats (the adapter's RouteStats)
// list GET /login.
func CheckAutoBesideMiddleware(t *testing.T, serve func(*cpusched.Scheduler) http.Handler, stats func(*cpusched.Scheduler) map[string]httpsched.RouteStats) {
	t.Helper()
	s := schedtest.NewScheduler(t)
	h := serve(s)
	Check(t, "/login", Record(h, "GET", "/login"), http.StatusOK, "task")
	Check(t, "/render", Record(h, "GET", "/render"), http.StatusOK, "direct")
	if got := RouteNames(s); got != "GET /render" {
		t.Errorf("Auto's routes: got %q, want %q alone", got, "GET /render")
	}
	if _, ok := stats(s)["GET /login"]; !ok {
		t.Errorf("RouteStats: got %v, want GET /login among them", stats(s))
	}
	runtime.KeepAlive(h)
}

// Work is a handler that computes for 2 ms and answers the time it
// ended; with ?sleep=1 it then sleeps 300 ms (a database call, as a
// handler that does not know it runs as a task makes one) and computes
// 2 ms more. CheckAutoIdleRelease serves it.
func Work(w http.ResponseWriter, r *http.Request) {
	Spin(2 * time.Millisecond)
	if r.URL.Query().Get("sleep") != "" {
		time.Sleep(300 * time.Millisecond)
		Spin(2 * time.Millisecond)
	}
	io.WriteString(w, time.Now().Format(time.RFC3339Nano))
}

// CheckAutoIdleRelease checks that a heavy route's request that sleeps
// mid-way gives its slot to the next request (httpsched.AutoIdleRelease),
// in IsolationOSPriority with one slot: serve returns an adapter's engine
// with Auto of s for all its routes and GET /work served by Work. Where
// the default mode is not IsolationOSPriority, or there are no thread CPU
// clocks, it skips the test.
func CheckAutoIdleRelease(t *testing.T, serve func(*cpusched.Scheduler) http.Handler) {
	t.Helper()
	if !autoroute.Measurable() || cpusched.DefaultIsolation() != cpusched.IsolationOSPriority {
		t.Skip("needs the thread CPU clocks of IsolationOSPriority")
	}
	s := schedtest.NewScheduler(t, cpusched.WithIsolation(cpusched.IsolationOSPriority), cpusched.WithWorkers(1))
	h := serve(s)
	get := func(path string) {
		if rec := Record(h, "GET", path); rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
	}
	get("/work")
	get("/work") // the second request decides: heavy from then on
	if !AutoRoute(t, s, "GET /work").Heavy {
		t.Fatal("GET /work is not heavy after its first two requests")
	}
	for try := 0; ; try++ {
		sleeperDone := make(chan time.Time, 1)
		go func() {
			get("/work?sleep=1")
			sleeperDone <- time.Now()
		}()
		time.Sleep(50 * time.Millisecond) // the sleeper is in its sleep
		get("/work")
		otherDone := time.Now()
		sleeperEnd := <-sleeperDone
		if otherDone.Before(sleeperEnd) && s.Stats().IdleReleases > 0 {
			return
		}
		// A busy machine can hold the sleeper's first 2 ms past the 50.
		if try == 2 {
			t.Fatalf("the second request ended %v after the sleeper's (it waited for its slot); IdleReleases %d",
				otherDone.Sub(sleeperEnd), s.Stats().IdleReleases)
		}
	}
}

// CheckAutoTurnsHeavy checks that a route light for its first requests
// (sampled one in 256 once it reads cheap) is moved once its requests
// grow heavy, and back once they are cheap again: serve returns an
// adapter's engine with Auto of s and opts for all its routes and GET
// /work served by a handler that computes for cost's duration (in ns).
func CheckAutoTurnsHeavy(t *testing.T, serve func(s *cpusched.Scheduler, cost *atomic.Int64, opts ...httpsched.Option) http.Handler) {
	t.Helper()
	if !autoroute.Measurable() {
		t.Skip("no thread CPU clocks: every route stays light")
	}
	s := schedtest.NewScheduler(t)
	var cost atomic.Int64
	h := serve(s, &cost, httpsched.WithHeavyThreshold(200*time.Microsecond))
	for range 300 {
		Record(h, "GET", "/work")
	}
	r := AutoRoute(t, s, "GET /work")
	if r.Heavy {
		t.Fatalf("GET /work at no cost: %+v, want light", r)
	}
	// On a loaded machine (go test -race work) an empty request's CPU
	// time can read past the threshold for a while, and the route move
	// and come back before the cost changes: each phase below counts its
	// own moves.
	base := r.Moves
	cost.Store(int64(time.Millisecond))
	n := 0
	for ; n < 600 && !AutoRoute(t, s, "GET /work").Heavy; n++ {
		Record(h, "GET", "/work")
	}
	if r := AutoRoute(t, s, "GET /work"); !r.Heavy || r.Moves != base+1 {
		t.Fatalf("GET /work after its requests grew to 1 ms: %+v after %d requests, want heavy after %d moves", r, n, base+1)
	}
	cost.Store(0)
	for n = 0; n < 200 && AutoRoute(t, s, "GET /work").Heavy; n++ {
		Record(h, "GET", "/work")
	}
	if r := AutoRoute(t, s, "GET /work"); r.Heavy || r.Moves != base+2 {
		t.Errorf("GET /work after its requests turned cheap: %+v after %d requests, want light after %d moves", r, n, base+2)
	}
	runtime.KeepAlive(h)
}
