package servetest

import (
	"net/http"
	"runtime"
	"testing"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
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
