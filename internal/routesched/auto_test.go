package routesched

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/autoroute"
	"github.com/cpusched/cpusched/internal/schedtest"
)

func TestAutoRoute(t *testing.T) {
	// A route's entry is found again without an allocation; the keys past
	// maxNamed still find their route, through the table.
	s := schedtest.NewScheduler(t)
	a, err := NewAuto(s, func(struct{}, http.ResponseWriter, *http.Request) {}, []httpsched.Option{httpsched.WithMaxRoutes(3)})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	tests := []struct{ method, path, want string }{
		{"GET", "/a/:id", "GET /a/:id"},
		{"BREW", "/a/:id", "/a/:id"},
		{"POST", "", ""},
		{"GET", "/b", autoroute.OtherRoute},
		{"PUT", "/b", autoroute.OtherRoute},
		{"PATCH", "/b", autoroute.OtherRoute},
		{"DELETE", "/b", autoroute.OtherRoute}, // past maxNamed: not kept
		{"GET", "/a/:id", "GET /a/:id"},
	}
	for _, tt := range tests {
		if got := a.Route(tt.method, tt.path, r).Name(); got != tt.want {
			t.Errorf("Route(%q, %q): got %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
	if n := len(*a.named.Load()); n != 6 {
		t.Errorf("%d keys kept, want 6 (maxNamed)", n)
	}
	if allocs := testing.AllocsPerRun(100, func() { a.Route("GET", "/a/:id", r) }); allocs != 0 {
		t.Errorf("Route of a known route: %v allocations, want 0", allocs)
	}
}

func TestNewAutoChecksTheOptions(t *testing.T) {
	s := schedtest.NewScheduler(t)
	for _, opt := range []httpsched.Option{httpsched.WithRetryAfter(0), httpsched.WithMaxRoutes(0)} {
		if a, err := NewAuto(s, func(struct{}, http.ResponseWriter, *http.Request) {}, []httpsched.Option{opt}); a != nil || err == nil {
			t.Errorf("got %v, %v, want no Auto and the option's error", a, err)
		}
	}
}

func TestAutoOptions(t *testing.T) {
	// The Auto options set the table, the others go to the heavy routes'
	// handlers, and a light route's request carries the load header with
	// WithLoadMetricsHeader.
	s := schedtest.NewScheduler(t)
	a, err := NewAuto(s, func(struct{}, http.ResponseWriter, *http.Request) {},
		[]httpsched.Option{httpsched.WithHeavyThreshold(time.Millisecond), httpsched.WithLoadMetricsHeader(), nil, httpsched.WithMaxRoutes(7)})
	if err != nil {
		t.Fatal(err)
	}
	if a.Table().Threshold() != time.Millisecond || a.maxNamed != 14 || len(a.opts) != 2 {
		t.Errorf("threshold %v, maxNamed %d, %d handler options; want 1ms, 14, 2 (the idle release, the header)", a.Table().Threshold(), a.maxNamed, len(a.opts))
	}
	rec := httptest.NewRecorder()
	a.Arrive(rec)
	if rec.Header().Get("Endpoint-Load-Metrics") == "" {
		t.Error("a light request with WithLoadMetricsHeader: no Endpoint-Load-Metrics header")
	}
	if a, err = NewAuto(s, func(struct{}, http.ResponseWriter, *http.Request) {}, nil); err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	a.Arrive(rec)
	if a.Table().Threshold() != autoroute.DefaultThreshold || len(rec.Header()) != 0 {
		t.Errorf("no options: threshold %v, header %v; want the default and none", a.Table().Threshold(), rec.Header())
	}
}

func TestAutoRouteConcurrent(t *testing.T) {
	// Requests of new routes at once each find their route's one entry.
	s := schedtest.NewScheduler(t)
	a, err := NewAuto(s, func(struct{}, http.ResponseWriter, *http.Request) {}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	var wg sync.WaitGroup
	found := make([][20]*autoroute.Route, 8)
	for g := range found {
		wg.Go(func() {
			for i := range 200 {
				found[g][i%20] = a.Route("GET", fmt.Sprint("/r", i%20), r)
			}
		})
	}
	wg.Wait()
	for g := range found {
		if found[g] != found[0] {
			t.Fatalf("goroutine %d found other entries than goroutine 0", g)
		}
	}
	if n := len(a.Table().Stats()); n != 20 {
		t.Errorf("%d routes, want 20", n)
	}
}
