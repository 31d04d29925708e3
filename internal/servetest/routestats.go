package servetest

import (
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/autoroute"
	"github.com/cpusched/cpusched/internal/schedtest"
)

// CheckRouteStats reports each route of got whose Limit and InFlight
// are not want's, each route of got that want has not, and each of
// want's that got has not. Overrun and OverrunWait depend on timing and
// are not compared.
func CheckRouteStats(t testing.TB, what string, got, want map[string]httpsched.RouteStats) {
	t.Helper()
	for name, st := range got {
		st.Overrun, st.OverrunWait = 0, 0
		if w, ok := want[name]; !ok {
			t.Errorf("%s: got route %q %+v, want no such route", what, name, st)
		} else if st != w {
			t.Errorf("%s: route %q: got %+v, want %+v", what, name, st, w)
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("%s: got no route %q, want it", what, name)
		}
	}
}

// CheckAdapterRouteStats checks an adapter's RouteStats, stats, with the
// engine that serve returns for s: GET /users/:id, GET /hello and
// GET /never through one Middleware of s with
// httpsched.WithMaxQueueWait(time.Hour) (no wait of the test goes past
// it), and POST /users/:id through another without the option. GET
// /users/:id's handler calls block before it answers; the others answer
// at once. It serves GET /hello and POST /users/1, then GET /users/7,
// and checks each route's figures while that request is in flight and
// once it has ended: a route's figures under another's name, or under
// the request's path, fail; /never, which no request reached, is
// absent.
func CheckAdapterRouteStats(t *testing.T, serve func(s *cpusched.Scheduler, block func()) http.Handler, stats func(*cpusched.Scheduler) map[string]httpsched.RouteStats) {
	t.Helper()
	s := schedtest.NewScheduler(t) // one slot
	running, release := make(chan struct{}), make(chan struct{})
	h := serve(s, func() {
		close(running)
		<-release
	})
	CheckRouteStats(t, "before any request", stats(s), nil)
	for _, r := range [][2]string{{"GET", "/hello"}, {"POST", "/users/1"}} {
		if rec := Record(h, r[0], r[1]); rec.Code != http.StatusOK {
			t.Fatalf("%s %s: %d %s", r[0], r[1], rec.Code, rec.Body)
		}
	}
	done := make(chan int)
	go func() { done <- Record(h, "GET", "/users/7").Code }()
	<-running

	// With one slot, WithMaxQueueWait's limit is 4 until its first
	// request ends (cold), then 2: the slots, 1, grown by one as that
	// request had the limit's every place.
	want := map[string]httpsched.RouteStats{
		"GET /users/:id":  {Limit: 4, InFlight: 1},
		"GET /hello":      {Limit: 2},
		"POST /users/:id": {},
	}
	CheckRouteStats(t, "GET /users/7 in flight", stats(s), want)
	close(release)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("GET /users/7: got %d, want 200", code)
	}
	want["GET /users/:id"] = httpsched.RouteStats{Limit: 2}
	CheckRouteStats(t, "GET /users/7 ended", stats(s), want)
	runtime.KeepAlive(h) // its routes are s's while it lives
}

// autoRouteStats returns the RouteStats of each of s's Auto routes
// (httpsched.AutoRoutes), by name.
func autoRouteStats(s *cpusched.Scheduler) map[string]httpsched.RouteStats {
	stats := map[string]httpsched.RouteStats{}
	for _, r := range httpsched.AutoRoutes(s) {
		stats[r.Route] = r.Stats
	}
	return stats
}

// CheckAutoRouteStats checks the RouteStats of s's Auto routes
// (httpsched.AutoRoute.Stats), with the handler that serve returns for
// s: Auto of s with httpsched.WithMaxQueueWait(time.Hour) (no wait of
// the test goes past it) for GET /users/{id}, which Spins for 3 ms and
// then calls block, GET /hello, which Spins for 3 ms, and GET /light,
// which answers at once; users, hello and light name them in s's routes.
// It serves /hello three times, /light and /users/1 twice (block returns at
// once), which makes /users and /hello heavy, then GET /users/7 and
// checks each route's figures while that request is held in block, and
// once it has ended: figures from another route, or a light route's
// that are not zero, fail. Without thread CPU clocks every route stays
// light, and it skips the test.
func CheckAutoRouteStats(t *testing.T, serve func(s *cpusched.Scheduler, block func()) http.Handler, users, hello, light string) {
	t.Helper()
	if !autoroute.Measurable() {
		t.Skip("no thread CPU clocks: every route stays light")
	}
	s := schedtest.NewScheduler(t) // one slot
	var hold atomic.Bool
	running, release := make(chan struct{}), make(chan struct{})
	h := serve(s, func() {
		if hold.Load() {
			close(running)
			<-release
		}
	})
	for _, path := range []string{"/hello", "/hello", "/hello", "/light", "/light", "/users/1", "/users/1"} {
		if rec := Record(h, "GET", path); rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
	}
	for name, heavy := range map[string]bool{users: true, hello: true, light: false} {
		if r := AutoRoute(t, s, name); r.Heavy != heavy {
			t.Fatalf("%s: %+v, want heavy %v", name, r, heavy)
		}
	}
	hold.Store(true)
	done := make(chan int)
	go func() { done <- Record(h, "GET", "/users/7").Code }()
	<-running

	// With one slot, WithMaxQueueWait's limit is 4 until its first
	// request ends (cold), then 2: the slots, 1, grown by one as that
	// request had the limit's every place. Each route's first two
	// requests ran directly, before it was heavy: /users/1's both, and
	// /hello's first two.
	want := map[string]httpsched.RouteStats{
		users: {Limit: 4, InFlight: 1},
		hello: {Limit: 2},
		light: {},
	}
	CheckRouteStats(t, "GET /users/7 in flight", autoRouteStats(s), want)
	close(release)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("GET /users/7: got %d, want 200", code)
	}
	want[users] = httpsched.RouteStats{Limit: 2}
	CheckRouteStats(t, "GET /users/7 ended", autoRouteStats(s), want)
	runtime.KeepAlive(h) // its routes are s's while it lives
}
