package httpsched

import (
	"context"
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
