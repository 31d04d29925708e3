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

// groupRequest returns a request to path in group.
func groupRequest(path, group string) *http.Request {
	r := httptest.NewRequest("GET", path, nil)
	r.Header.Set("X-Group", group)
	return r
}

// TestMaxQueueWaitPerGroup: WithMaxQueueWait keeps a limit per group of
// the route's requests. A group whose request waited past d has its own
// limit halved and its requests shed; the other group's requests, whose
// waits stayed within d, are admitted as before. Regression: the route
// had one limit, so a tenant whose group's weight made its requests wait
// (a weight of 25 beside 300, 100 and 100) halved it for every tenant, and
// the tenant of weight 300, whose logins never waited more than 131 ms,
// got 275 of the route's 608 answers 503 at a d of 300 ms.
func TestMaxQueueWaitPerGroup(t *testing.T) {
	const d = 10 * time.Millisecond
	s := schedtest.NewScheduler(t, cpusched.WithWorkers(4))
	next := newGroupRoute()
	hd := asHandler(t, Handler(s, next, WithMaxQueueWait(d), groupOption, withWaited(next.waited)))
	codes := make(chan int, 8) // buffered: a failed test's held requests still end
	t.Cleanup(func() {         // before Close, which waits for them
		for _, group := range []string{"gold", "bronze"} {
			close(next.releaseOf(group))
		}
	})
	hold := func(group string) {
		t.Helper()
		go func() { codes <- serve(hd, groupRequest("/hold", group)).Code }()
		select {
		case <-next.entered:
		case code := <-codes:
			t.Fatalf("%s: got %d, want the request to enter the handler", group, code)
		}
	}
	for _, group := range []string{"gold", "bronze"} { // the first samples end the cold starts
		next.setWait(group, time.Millisecond)
		if code := serve(hd, groupRequest("/", group)).Code; code != http.StatusOK {
			t.Fatalf("%s's first request: got %d, want 200", group, code)
		}
	}
	for _, group := range []string{"gold", "gold", "bronze", "bronze"} {
		hold(group)
	}
	next.setWait("bronze", 10*d)
	next.releaseOf("bronze") <- struct{}{}
	if code := <-codes; code != http.StatusOK {
		t.Fatalf("released bronze request: got %d, want 200", code)
	}
	// bronze's limit is halved, 4 to 2; gold's is still 4.
	if code := serve(hd, groupRequest("/", "gold")).Code; code != http.StatusOK {
		t.Errorf("gold, 2 of its requests in flight, after a bronze request waited %v: got %d, want 200", 10*d, code)
	}
	hold("bronze")
	check503(t, serve(hd, groupRequest("/", "bronze")), "1")
	if st, _ := RouteStatsOf(hd); st.InFlight != 4 || st.Limit != 6 {
		t.Errorf("got RouteStats' InFlight %d, Limit %d; want 4 (2 gold, 2 bronze), 6 (gold's 4, bronze's 2)", st.InFlight, st.Limit)
	}
	for range 2 {
		next.releaseOf("bronze") <- struct{}{}
		next.releaseOf("gold") <- struct{}{}
	}
	for range 4 {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("released request: got %d, want 200", code)
		}
	}
	if st, _ := RouteStatsOf(hd); st.InFlight != 0 {
		t.Errorf("after the releases: got InFlight %d, want 0", st.InFlight)
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
