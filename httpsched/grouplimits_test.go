package httpsched

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/schedtest"
)

// groupRoute is a handler whose requests name their group in the X-Group
// header (groupOption puts their tasks in it) and report, as their
// Task.Waited, the wait set for that group (waited). A request to /hold
// signals entered and waits for its group's release.
type groupRoute struct {
	entered chan struct{}
	mu      sync.Mutex
	release map[string]chan struct{}
	waits   map[string]time.Duration
	tasks   sync.Map // *cpusched.Task -> its group, while its handler runs
}

func newGroupRoute() *groupRoute {
	return &groupRoute{entered: make(chan struct{}), release: map[string]chan struct{}{}, waits: map[string]time.Duration{}}
}

// groupOption puts each request's task in the group its X-Group names.
var groupOption = WithRequestTaskOptions(func(r *http.Request) ([]cpusched.TaskOption, error) {
	return []cpusched.TaskOption{cpusched.WithGroup(r.Header.Get("X-Group"))}, nil
})

func (g *groupRoute) releaseOf(group string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.release[group] == nil {
		g.release[group] = make(chan struct{})
	}
	return g.release[group]
}

func (g *groupRoute) setWait(group string, d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waits[group] = d
}

func (g *groupRoute) waited(t *cpusched.Task) time.Duration {
	group, _ := g.tasks.Load(t)
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waits[group.(string)]
}

func (g *groupRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	group := r.Header.Get("X-Group")
	task := TaskFrom(r.Context())
	g.tasks.Store(task, group)
	if r.URL.Path == "/hold" {
		g.entered <- struct{}{}
		<-g.releaseOf(group)
	}
	w.Write([]byte("ok"))
}

// hold sends a request of group to /hold through hd, its code to come on
// codes, and returns once it has entered the handler.
func (g *groupRoute) hold(t *testing.T, hd http.Handler, codes chan int, group string) {
	t.Helper()
	go func() { codes <- serve(hd, groupRequest("/hold", group)).Code }()
	select {
	case <-g.entered:
	case code := <-codes:
		t.Fatalf("%q: got %d, want the request to enter the handler", group, code)
	}
}

// warm serves one request of each group through hd, reporting a wait of
// 1 ms: the first samples end the limits' cold starts.
func (g *groupRoute) warm(t *testing.T, hd http.Handler, groups ...string) {
	t.Helper()
	for _, group := range groups {
		g.setWait(group, time.Millisecond)
		if code := serve(hd, groupRequest("/", group)).Code; code != http.StatusOK {
			t.Fatalf("%q's first request: got %d, want 200", group, code)
		}
	}
}

// groupRequest returns a request to path in group.
func groupRequest(path, group string) *http.Request {
	r := httptest.NewRequest("GET", path, nil)
	r.Header.Set("X-Group", group)
	return r
}

// placeOption puts each request's task, all in the default group, at
// the class or nice level its X-Group names ("batch", "nice", or "" for
// the defaults).
var placeOption = WithRequestTaskOptions(func(r *http.Request) ([]cpusched.TaskOption, error) {
	switch r.Header.Get("X-Group") {
	case "batch":
		return []cpusched.TaskOption{cpusched.WithClass(cpusched.ClassBatch)}, nil
	case "nice":
		return []cpusched.TaskOption{cpusched.WithNice(10)}, nil
	}
	return nil, nil
})

// TestMaxQueueWaitPerGroup: WithMaxQueueWait keeps a limit per group of
// the route's requests. A group whose request waited past d has its own
// limit halved and its requests shed; the other group's requests, whose
// waits stayed within d, are admitted as before. Regression: the route
// had one limit, so a tenant whose group's weight made its requests wait
// (a weight of 25 beside 300, 100 and 100) halved it for every tenant, and
// the tenant of weight 300, whose logins never waited more than 131 ms,
// got 275 of the route's 608 answers 503 at a d of 300 ms. The same holds
// within a group for requests at another class or nice level ("place"),
// whose waits differ as much: with a limit per group, niced requests'
// longer waits were learned as every request's of the group.
func TestMaxQueueWaitPerGroup(t *testing.T) {
	tests := []struct {
		name       string
		option     Option
		fast, slow string   // the labels (X-Group) whose waits stay within d, and go past it
		others     []string // more labels, at their cold limits
		wantLimit  int
	}{
		{"group", groupOption, "gold", "bronze", nil, 6},          // gold's 4, bronze's 2
		{"place", placeOption, "", "nice", []string{"batch"}, 10}, // the defaults' 4, nice's 2, batch's 4
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const d = 10 * time.Millisecond
			s := schedtest.NewScheduler(t, cpusched.WithWorkers(4))
			next := newGroupRoute()
			hd := asHandler(t, Handler(s, next, WithMaxQueueWait(d), tt.option, withWaited(next.waited)))
			labels := append([]string{tt.fast, tt.slow}, tt.others...)
			codes := make(chan int, 8) // buffered: a failed test's held requests still end
			t.Cleanup(func() {         // before Close, which waits for them
				for _, label := range labels {
					close(next.releaseOf(label))
				}
			})
			next.warm(t, hd, labels...)
			for _, label := range []string{tt.fast, tt.fast, tt.slow, tt.slow} {
				next.hold(t, hd, codes, label)
			}
			next.setWait(tt.slow, 10*d)
			next.releaseOf(tt.slow) <- struct{}{}
			if code := <-codes; code != http.StatusOK {
				t.Fatalf("released %q request: got %d, want 200", tt.slow, code)
			}
			// The slow label's limit is halved, 4 to 2; the others' are 4.
			for _, label := range append([]string{tt.fast}, tt.others...) {
				if code := serve(hd, groupRequest("/", label)).Code; code != http.StatusOK {
					t.Errorf("%q, after a %q request waited %v: got %d, want 200", label, tt.slow, 10*d, code)
				}
			}
			next.hold(t, hd, codes, tt.slow)
			check503(t, serve(hd, groupRequest("/", tt.slow)), "1")
			if st, _ := RouteStatsOf(hd); st.InFlight != 4 || st.Limit != tt.wantLimit {
				t.Errorf("got RouteStats' InFlight %d, Limit %d; want 4 (2 %q, 2 %q), %d", st.InFlight, st.Limit, tt.fast, tt.slow, tt.wantLimit)
			}
			for range 2 {
				next.releaseOf(tt.slow) <- struct{}{}
				next.releaseOf(tt.fast) <- struct{}{}
			}
			for range 4 {
				if code := <-codes; code != http.StatusOK {
					t.Errorf("released request: got %d, want 200", code)
				}
			}
			if st, _ := RouteStatsOf(hd); st.InFlight != 0 {
				t.Errorf("after the releases: got InFlight %d, want 0", st.InFlight)
			}
		})
	}
}

// TestShedTenantsBesideNonYielding: a route of calls that cannot yield
// (login, 62 ms, as bcrypt at cost 10) and a route that checkpoints
// (render, 5 ms), each with WithMaxQueueWait, on 2 slots, one closed-loop
// client per tenant and route, each tenant a group: weights 300, 100, 100
// and 25. The tenant of weight 25 gets about a twentieth of the slots, and
// its requests wait several times d whatever the routes admit; the other
// tenants' requests wait within d. With one limit per route, each of the
// light tenant's long waits halved it for every tenant, and the heavy
// tenant's logins were shed, about as many as served here (34 and 31 in 3
// s): each group's requests are limited by their own waits now, and a
// group with one request in flight is never shed. The work holds the
// slots by sleeping, so that the machine's load changes the waits less.
func TestShedTenantsBesideNonYielding(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 2 s")
	}
	s := schedtest.NewScheduler(t, cpusched.WithIsolation(cpusched.IsolationNone), cpusched.WithWorkers(2))
	tenants := []struct {
		name   string
		weight int
	}{{"t1", 300}, {"t2", 100}, {"t3", 100}, {"t4", 25}}
	for _, tn := range tenants {
		if err := s.SetGroupWeight(tn.name, tn.weight); err != nil {
			t.Fatal(err)
		}
	}
	const loginWait, renderWait = 300 * time.Millisecond, 100 * time.Millisecond
	var mu sync.Mutex
	longest := map[string]time.Duration{} // each route and tenant's longest wait served
	served := func(route string, r *http.Request, task *cpusched.Task) {
		mu.Lock()
		defer mu.Unlock()
		key := route + " " + r.Header.Get("X-Group")
		longest[key] = max(longest[key], task.Waited())
	}
	routes := map[string]http.Handler{
		"login": Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(62 * time.Millisecond) // no Checkpoint
			served("login", r, TaskFrom(r.Context()))
		}), groupOption, WithMaxQueueWait(loginWait)),
		"render": Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sleepWork(5, time.Millisecond, TaskFrom(r.Context()))
			served("render", r, TaskFrom(r.Context()))
		}), groupOption, WithMaxQueueWait(renderWait)),
	}
	shed := map[string]int{}
	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for route, h := range routes {
		for _, tn := range tenants {
			wg.Go(func() {
				for time.Now().Before(stop) {
					if serve(h, groupRequest("/"+route, tn.name)).Code == http.StatusOK {
						continue
					}
					mu.Lock()
					shed[route+" "+tn.name]++
					mu.Unlock()
					time.Sleep(10 * time.Millisecond) // as a client that pauses after a 503
				}
			})
		}
	}
	wg.Wait()
	t.Logf("shed %v; longest waits served %v", shed, longest)
	for route := range routes {
		for _, tn := range tenants {
			if key := route + " " + tn.name; shed[key] > 0 {
				t.Errorf("%s: %d requests shed, want none: one client in its group, its longest wait served %v",
					key, shed[key], longest[key].Round(time.Millisecond))
			}
		}
	}
}
