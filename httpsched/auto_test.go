package httpsched

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/autoroute"
	"github.com/cpusched/cpusched/internal/schedtest"
)

// spin computes for about d of CPU time (schedtest.Spin).
func spin(d time.Duration) { schedtest.Spin(d) }

// autoMux is a server with a heavy route (/heavy computes 3 ms), a light
// one and one that waits 5 ms and computes nothing; each answers whether
// its request ran as a task.
func autoMux() *http.ServeMux {
	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter, r *http.Request) {
		if TaskFrom(r.Context()) != nil {
			io.WriteString(w, "task")
		} else {
			io.WriteString(w, "direct")
		}
	}
	mux.HandleFunc("GET /heavy", func(w http.ResponseWriter, r *http.Request) {
		spin(3 * time.Millisecond)
		answer(w, r)
	})
	mux.HandleFunc("GET /light", answer)
	mux.HandleFunc("GET /wait/{id}", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond)
		if r.PathValue("id") == "" {
			http.Error(w, "no id", http.StatusBadRequest)
			return
		}
		answer(w, r)
	})
	return mux
}

func autoRoute(t *testing.T, h http.Handler, name string) AutoRoute {
	t.Helper()
	routes, ok := AutoRoutesOf(h)
	if !ok {
		t.Fatal("AutoRoutesOf: not an Auto handler")
	}
	for _, r := range routes {
		if r.Route == name {
			return r
		}
	}
	t.Fatalf("route %q not tracked: %+v", name, routes)
	return AutoRoute{}
}

func TestAutoFindsHeavyRoutes(t *testing.T) {
	if !autoroute.Measurable() {
		t.Skip("no thread CPU clocks: every route stays light")
	}
	for _, mode := range []cpusched.Isolation{cpusched.IsolationNone, cpusched.IsolationReserve, cpusched.IsolationOSPriority} {
		t.Run(mode.String(), func(t *testing.T) {
			s := schedtest.NewScheduler(t, cpusched.WithIsolation(mode))
			h := Auto(s, autoMux())
			get := func(path string) string {
				rec := serve(h, httptest.NewRequest("GET", path, nil))
				if rec.Code != http.StatusOK {
					t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
				}
				return rec.Body.String()
			}
			var heavy []string
			for range 12 {
				heavy = append(heavy, get("/heavy"))
				if got := get("/light"); got != "direct" {
					t.Errorf("/light ran as a %s", got)
				}
				if got := get("/wait/7"); got != "direct" {
					t.Errorf("/wait/7 ran as a %s", got)
				}
			}
			// The first sample makes /heavy heavy: its later requests
			// are tasks.
			if heavy[0] != "direct" || heavy[len(heavy)-1] != "task" {
				t.Errorf("/heavy ran as %v, want direct first, then tasks", heavy)
			}
			hr := autoRoute(t, h, "GET /heavy")
			if !hr.Heavy || hr.CPU < 2*time.Millisecond || hr.CPU > 30*time.Millisecond || hr.Requests != 12 || hr.Moves != 1 {
				t.Errorf("GET /heavy: %+v, want heavy, CPU about 3ms, 12 requests, 1 move", hr)
			}
			if hr.Sampled < 3 {
				t.Errorf("GET /heavy: %d samples, want some inside tasks too", hr.Sampled)
			}
			wr := autoRoute(t, h, "GET /wait/{id}")
			if wr.Heavy || wr.CPU > time.Millisecond || wr.Sampled < 4 {
				t.Errorf("GET /wait/{id}: %+v, want light, CPU well under its 5 ms wait", wr)
			}
		})
	}
}

func TestAutoRouteTurnsLight(t *testing.T) {
	if !autoroute.Measurable() {
		t.Skip("no thread CPU clocks")
	}
	s := schedtest.NewScheduler(t)
	var cost time.Duration = 2 * time.Millisecond
	mux := http.NewServeMux()
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) { spin(cost) })
	h := Auto(s, mux, WithHeavyThreshold(time.Millisecond))
	for range 4 {
		serve(h, httptest.NewRequest("GET", "/work", nil))
	}
	if r := autoRoute(t, h, "/work"); !r.Heavy {
		t.Fatalf("/work at 2 ms a request: %+v, want heavy", r)
	}
	cost = 0
	for i := 0; i < 200 && autoRoute(t, h, "/work").Heavy; i++ {
		serve(h, httptest.NewRequest("GET", "/work", nil))
	}
	if r := autoRoute(t, h, "/work"); r.Heavy || r.Moves != 2 {
		t.Errorf("/work after its requests turned cheap: %+v, want light after 2 moves", r)
	}
}

// TestAutoColdStartStaysLight: a route whose first request pays a
// one-time cost (a sync.Once of 5 ms of CPU) and whose later ones wait
// and compute little is never heavy: the first sample decides nothing.
func TestAutoColdStartStaysLight(t *testing.T) {
	if !autoroute.Measurable() {
		t.Skip("no thread CPU clocks")
	}
	s := schedtest.NewScheduler(t)
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("/users", func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { spin(5 * time.Millisecond) }) // templates parsed, a pool dialled
		time.Sleep(time.Millisecond)                   // the database
	})
	h := Auto(s, mux)
	for i := range 8 {
		serve(h, httptest.NewRequest("GET", "/users", nil))
		if r := autoRoute(t, h, "/users"); r.Heavy || r.Moves != 0 {
			t.Fatalf("/users after %d requests: %+v, want light and never moved", i+1, r)
		}
	}
}

func TestAutoMaxRoutes(t *testing.T) {
	s := schedtest.NewScheduler(t)
	h := Auto(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), WithMaxRoutes(2))
	for _, p := range []string{"/a", "/b", "/c", "/d", "/a"} {
		serve(h, httptest.NewRequest("GET", p, nil))
	}
	routes, _ := AutoRoutesOf(h)
	var names []string
	for _, r := range routes {
		names = append(names, r.Route)
	}
	if got := strings.Join(names, ","); got != "GET /a,GET /b,"+OtherRoute {
		t.Errorf("routes %s, want GET /a, GET /b and %s", got, OtherRoute)
	}
	if routes[2].Requests != 2 {
		t.Errorf("%s: %d requests, want 2", OtherRoute, routes[2].Requests)
	}
}

func TestAutoBadOptions(t *testing.T) {
	s := schedtest.NewScheduler(t)
	h := http.NewServeMux()
	for _, c := range []struct {
		opt  Option
		want string
	}{
		{WithHeavyThreshold(time.Microsecond), "httpsched: WithHeavyThreshold(1µs): 1µs is out of range (10µs..10s)"},
		{WithHeavyThreshold(time.Minute), "out of range (10µs..10s)"},
		{WithMaxRoutes(0), "httpsched: WithMaxRoutes(0): 0 is out of range (1..65536)"},
		{WithRouteOf(nil), "WithRouteOf(nil)"},
		{WithTaskOptions(cpusched.WithNice(99)), "WithTaskOptions"},
	} {
		if _, err := NewAuto(s, h, c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewAuto: got %v, want %q", err, c.want)
		}
	}
	if _, err := NewHandler(s, h, WithHeavyThreshold(time.Millisecond)); err == nil || !strings.Contains(err.Error(), "an option of Auto") {
		t.Errorf("NewHandler with WithHeavyThreshold: got %v", err)
	}
	if _, err := NewAuto(nil, h); err == nil {
		t.Error("NewAuto(nil scheduler): no error")
	}
	if _, err := NewAuto(s, nil); err == nil {
		t.Error("NewAuto(nil handler): no error")
	}
}

func TestAutoRoutesOfScheduler(t *testing.T) {
	s := schedtest.NewScheduler(t)
	h1 := Auto(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), WithRouteOf(func(*http.Request) string { return "one" }))
	h2 := Auto(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), WithRouteOf(func(*http.Request) string { return "two" }))
	serve(h1, httptest.NewRequest("GET", "/", nil))
	serve(h2, httptest.NewRequest("GET", "/", nil))
	var names []string
	for _, r := range AutoRoutes(s) {
		names = append(names, r.Route)
	}
	if got := strings.Join(names, ","); got != "one,two" {
		t.Errorf("AutoRoutes: %s, want one,two", got)
	}
	runtime.KeepAlive(h1)
	runtime.KeepAlive(h2)
	if _, ok := AutoRoutesOf(http.NotFoundHandler()); ok {
		t.Error("AutoRoutesOf(NotFoundHandler): true")
	}
}
