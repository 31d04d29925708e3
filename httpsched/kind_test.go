package httpsched

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cpusched/cpusched/internal/schedtest"
)

// TestRoutesAreKinds: one Handler serves two routes of a ServeMux, in
// one group: each request's kind is its route (cpusched.WithKind), so
// the scheduler does not take the small requests of /small for the calls
// of /call that cannot yield (schedtest.KindRig says how it checks).
func TestRoutesAreKinds(t *testing.T) {
	var rig schedtest.KindRig
	h := Handler(schedtest.NewScheduler(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rig.Work(TaskFrom(r.Context()), r.Pattern == "GET /call")
	}))
	mux := http.NewServeMux()
	mux.Handle("GET /call", h)
	mux.Handle("GET /small", h)
	rig.Check(t, func(ctx context.Context, call bool) {
		path := "/small"
		if call {
			path = "/call"
		}
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil).WithContext(ctx))
	})
}

// TestRouteOptionsKept: a handler keeps the task options of up to
// maxRouteKinds route patterns, so that a routed request makes none; a
// request of a pattern past those gets its own, of its route's kind too;
// one with no pattern gets the handler's.
func TestRouteOptionsKept(t *testing.T) {
	h := Handler(schedtest.NewScheduler(t), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).(*handler)
	req := func(pattern string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.Pattern = pattern
		return r
	}
	for i := range maxRouteKinds + 6 {
		opts := h.taskOptions(req(fmt.Sprintf("GET /r%d", i)))
		if len(opts) != len(h.opts) {
			t.Fatalf("route %d: %d task options, want %d (its kind and WithTaskOptions')", i, len(opts), len(h.opts))
		}
	}
	if got := h.routeKinds.Load(); got != maxRouteKinds {
		t.Errorf("kept the options of %d routes, want %d", got, maxRouteKinds)
	}
	a, b := h.taskOptions(req("GET /r1")), h.taskOptions(req("GET /r1"))
	if &a[0] != &b[0] {
		t.Errorf("a kept route's requests got options of their own")
	}
	if opts := h.taskOptions(req("")); &opts[0] != &h.opts[0] {
		t.Errorf("a request with no pattern did not get the handler's options")
	}
}
