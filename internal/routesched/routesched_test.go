package routesched

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/leakcheck"
	"github.com/cpusched/cpusched/internal/schedtest"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func TestServeRunsTheCallInTheTask(t *testing.T) {
	s := schedtest.NewScheduler(t)
	type call struct{ body string }
	rs, err := New(s, func(c *call, w http.ResponseWriter, r *http.Request) {
		if httpsched.TaskFrom(r.Context()) == nil {
			t.Error("got no task in run's request, want the task")
		}
		w.Write([]byte(c.body))
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	rs.Serve("GET", "/", &call{"from the call"}, rec, httptest.NewRequest("GET", "/", nil))
	if rec.Body.String() != "from the call" {
		t.Errorf("got %q, want %q", rec.Body, "from the call")
	}
}

func TestOneHandlerPerRoute(t *testing.T) {
	// A route's handler is made once; methods that are not net/http's
	// share one, so that what clients send cannot grow the map.
	s := schedtest.NewScheduler(t)
	rs, err := New(s, func(struct{}, http.ResponseWriter, *http.Request) {}, nil)
	if err != nil {
		t.Fatal(err)
	}
	handler := func(method, path string) http.Handler { return rs.handler(routeKey{routeMethod(method), path}) }
	tests := []struct {
		a, b [2]string // method, path
		same bool
	}{
		{[2]string{"GET", "/a"}, [2]string{"GET", "/a"}, true},
		{[2]string{"GET", "/a"}, [2]string{"POST", "/a"}, false},
		{[2]string{"GET", "/a"}, [2]string{"GET", "/b"}, false},
		{[2]string{"BREW", "/a"}, [2]string{"WHEN", "/a"}, true},
		{[2]string{"BREW", "/a"}, [2]string{"GET", "/a"}, false},
	}
	for _, tt := range tests {
		if got := handler(tt.a[0], tt.a[1]) == handler(tt.b[0], tt.b[1]); got != tt.same {
			t.Errorf("%v and %v: got the same handler %v, want %v", tt.a, tt.b, got, tt.same)
		}
	}
}

func TestNewChecksTheOptions(t *testing.T) {
	s := schedtest.NewScheduler(t)
	if rs, err := New(s, func(struct{}, http.ResponseWriter, *http.Request) {}, []httpsched.Option{httpsched.WithRetryAfter(0)}); rs != nil || err == nil {
		t.Errorf("got %v, %v, want no Routes and WithRetryAfter's error", rs, err)
	}
}
