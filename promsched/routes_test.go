package promsched

import (
	"go/parser"
	"go/token"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/autoroute"
	"github.com/cpusched/cpusched/internal/schedtest"
	"github.com/cpusched/cpusched/internal/servetest"
)

func TestRoutes(t *testing.T) {
	// Two Auto wrappers of s: the first names every request "GET /x", the
	// second by its path. GET /x is one series with the requests of both.
	s := schedtest.NewScheduler(t)
	empty := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	first := httpsched.Auto(s, empty, httpsched.WithRouteOf(func(*http.Request) string { return "GET /x" }))
	second := httpsched.Auto(s, empty, httpsched.WithRouteOf(func(r *http.Request) string { return "GET " + r.URL.Path }))
	for _, rq := range []struct {
		h    http.Handler
		path string
	}{{first, "/"}, {first, "/"}, {first, "/"}, {second, "/x"}, {second, "/x"}, {second, "/y"}} {
		servetest.Record(rq.h, "GET", rq.path)
	}
	const want = `
# HELP cpusched_route_heavy 1 while an Auto wrapper runs the route's requests as tasks, else 0.
# TYPE cpusched_route_heavy gauge
cpusched_route_heavy{route="GET /x"} 0
cpusched_route_heavy{route="GET /y"} 0
# HELP cpusched_route_moves_total Times a route of an Auto wrapper moved between heavy (tasks) and light (direct).
# TYPE cpusched_route_moves_total counter
cpusched_route_moves_total{route="GET /x"} 0
cpusched_route_moves_total{route="GET /y"} 0
# HELP cpusched_route_requests_total Requests of a route of an Auto wrapper, as tasks or directly.
# TYPE cpusched_route_requests_total counter
cpusched_route_requests_total{route="GET /x"} 5
cpusched_route_requests_total{route="GET /y"} 1
`
	if err := testutil.CollectAndCompare(NewCollector(s), strings.NewReader(want),
		"cpusched_route_heavy", "cpusched_route_moves_total", "cpusched_route_requests_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(NewCollector(s), "cpusched_route_cpu_seconds"); got != 2 {
		t.Errorf("cpusched_route_cpu_seconds: %d series, want 2", got)
	}
	runtime.KeepAlive(first)
	runtime.KeepAlive(second)
}

func TestRouteHeavy(t *testing.T) {
	if !autoroute.Measurable() {
		t.Skip("no thread CPU clocks: every route stays light")
	}
	s := schedtest.NewScheduler(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /heavy", func(http.ResponseWriter, *http.Request) { servetest.Spin(3 * time.Millisecond) })
	h := httpsched.Auto(s, mux)
	for range 3 {
		servetest.Record(h, "GET", "/heavy")
	}
	families := gather(t, s)
	heavy, cpu := find(families, "cpusched_route_heavy", "GET /heavy"), find(families, "cpusched_route_cpu_seconds", "GET /heavy")
	if heavy == nil || cpu == nil || value(heavy) != 1 || value(cpu) < autoroute.DefaultThreshold.Seconds() {
		t.Errorf("GET /heavy: heavy %v, CPU %v; want 1 and at least the threshold", heavy, cpu)
	}
	runtime.KeepAlive(h)
}

func TestMergeRoutes(t *testing.T) {
	ms := time.Millisecond
	got := mergeRoutes([]httpsched.AutoRoute{
		{Route: "a", Requests: 5}, // not sampled: no average
		{Route: "a", CPU: 4 * ms, Requests: 30, Sampled: 6, Moves: 1, Heavy: true},
		{Route: "b", CPU: ms, Requests: 2, Sampled: 2},
		{Route: "a", CPU: ms, Requests: 10, Sampled: 4},
		{Route: "a", Requests: 5},
	})
	want := []httpsched.AutoRoute{
		{Route: "a", CPU: 3250 * time.Microsecond, Requests: 50, Sampled: 10, Moves: 1, Heavy: true},
		{Route: "b", CPU: ms, Requests: 2, Sampled: 2},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestMetricsDocumented checks that the package comment's table lists
// every metric the collector describes.
func TestMetricsDocumented(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "promsched.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	name := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for _, d := range NewCollector(schedtest.NewScheduler(t)).(*collector).descs() {
		m := name.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		if !regexp.MustCompile(`(?m)^\t` + m[1] + ` `).MatchString(doc) {
			t.Errorf("%s is not in the package comment's table", m[1])
		}
	}
}
