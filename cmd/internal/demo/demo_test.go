package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cpusched/cpusched"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestServer returns a Server with one worker and its httptest server,
// both closed at the end of the test.
func newTestServer(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, hs
}

// get does a request and returns the status and the body.
func get(t *testing.T, method, url string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// wantCRC is the CRC after n passes over s's buffer.
func wantCRC(s *Server, n int) string {
	var crc uint32
	for range n {
		crc = crc32.Update(crc, crc32.IEEETable, s.buf)
	}
	return fmt.Sprintf("%08x", crc)
}

func TestEndpoints(t *testing.T) {
	s, hs := newTestServer(t, Config{Workers: 1})
	tests := []struct {
		path string
		want string // the whole body
	}{
		{"/delay", "delayed 1ms\n"},
		{"/delay?d=50us", "delayed 50µs\n"},
		{"/delay?d=2ms", "delayed 2ms\n"},
		{"/delay1ms", "delayed 1ms\n"},
		{"/checksum?n=3", `{"passes":3,"crc":"` + wantCRC(s, 3) + `","sched":false}` + "\n"},
		{"/checksum?n=3&sched=0", `{"passes":3,"crc":"` + wantCRC(s, 3) + `","sched":false}` + "\n"},
		{"/checksum?n=5&sched=1", `{"passes":5,"crc":"` + wantCRC(s, 5) + `","sched":true}` + "\n"},
		{"/checksum?n=5&sched=1&checkpoint=0", `{"passes":5,"crc":"` + wantCRC(s, 5) + `","sched":true}` + "\n"},
		{"/checksum?n=5&sched=1&checkpoint=1", `{"passes":5,"crc":"` + wantCRC(s, 5) + `","sched":true}` + "\n"},
		{"/checksum?n=2&sched=1&class=batch&nice=5&group=g1", `{"passes":2,"crc":"` + wantCRC(s, 2) + `","sched":true}` + "\n"},
		{"/checksum?n=2&sched=1&class=realtime&nice=-20", `{"passes":2,"crc":"` + wantCRC(s, 2) + `","sched":true}` + "\n"},
		{"/checksumWithoutCpuWorker?n=4", `{"passes":4,"crc":"` + wantCRC(s, 4) + `","sched":false}` + "\n"},
		{"/checksumWithCpuWorker?n=4", `{"passes":4,"crc":"` + wantCRC(s, 4) + `","sched":true}` + "\n"},
		{"/checksumSmallTaskWithCpuWorker", `{"passes":10,"crc":"` + wantCRC(s, 10) + `","sched":true}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			code, _, body := get(t, "GET", hs.URL+tt.path)
			if code != http.StatusOK || body != tt.want {
				t.Errorf("got %d %q, want 200 %q", code, body, tt.want)
			}
		})
	}
	st := s.Stats()
	if st.Scheduler.Classes["batch"].Submitted != 1 || st.Scheduler.OtherGroups.Submitted != 1 {
		t.Errorf("got batch submitted %d, untracked groups (g1) submitted %d; want 1 and 1",
			st.Scheduler.Classes["batch"].Submitted, st.Scheduler.OtherGroups.Submitted)
	}
}

func TestChecksumDefaultPasses(t *testing.T) {
	// One request of the random default size, on each path (about 10,000
	// passes of 256 KiB: a second or two with -race).
	_, hs := newTestServer(t, Config{Workers: 1})
	for _, path := range []string{"/checksum", "/checksumWithCpuWorker"} {
		code, _, body := get(t, "GET", hs.URL+path)
		var got struct {
			Passes int `json:"passes"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil || code != http.StatusOK {
			t.Fatalf("%s: got %d %q (%v), want 200 and JSON", path, code, body, err)
		}
		if got.Passes < DefaultMinPasses || got.Passes > DefaultMaxPasses {
			t.Errorf("%s: got %d passes, want %d..%d", path, got.Passes, DefaultMinPasses, DefaultMaxPasses)
		}
	}
}

func TestBadRequests(t *testing.T) {
	_, hs := newTestServer(t, Config{Workers: 1})
	tests := []struct {
		path string
		want string // in the body
	}{
		{"/checksum?n=0", `n: must be an integer in 1..1000000, got "0"`},
		{"/checksum?n=1000001", `n: must be an integer in 1..1000000, got "1000001"`},
		{"/checksum?n=abc", `n: must be an integer in 1..1000000, got "abc"`},
		{"/checksum?n=-1&sched=1", `n: must be an integer in 1..1000000`},
		{"/checksumWithCpuWorker?n=", `n: must be an integer in 1..1000000, got ""`},
		{"/delay?d=0s", `d: must be a duration in 1us..10s (e.g. 1ms), got "0s"`},
		{"/delay?d=11s", `d: must be a duration in 1us..10s (e.g. 1ms), got "11s"`},
		{"/delay?d=1", `d: must be a duration in 1us..10s`},
		{"/delay?d=500ns", `d: must be a duration in 1us..10s`},
		{"/checksum?n=1&sched=2", `sched: must be 0 (run on the handler goroutine) or 1 (run as a cpusched task), got "2"`},
		{"/checksum?n=1&sched=1&checkpoint=yes", `checkpoint: must be 0 (a task's passes without Checkpoint) or 1 (a Checkpoint after every pass), got "yes"`},
		{"/checksum?n=1&nice=30", `nice: must be an integer in -20..19, got "30"`},
		{"/checksum?n=1&sched=1&nice=-21", `nice: must be an integer in -20..19, got "-21"`},
		{"/checksum?n=1&nice=x", `nice: must be an integer in -20..19`},
		{"/checksum?n=1&class=bogus", `class: cpusched: unknown class "bogus" (valid: normal, realtime, batch, idle)`},
		{"/checksum?n=1&sched=1&group=" + strings.Repeat("g", 300), `group: must be at most 256 bytes, got 300`},
	}
	for _, tt := range tests {
		name := tt.path
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			code, _, body := get(t, "GET", hs.URL+tt.path)
			if code != http.StatusBadRequest || !strings.Contains(body, tt.want) || strings.Count(body, "\n") != 1 {
				t.Errorf("got %d %q, want 400 and one line containing %q", code, body, tt.want)
			}
		})
	}
}

// TestChecksumTaskWithoutCheckpoint: with checkpoint=0 a task's passes
// never reach a Checkpoint, so a cancellation does not stop them; with a
// Checkpoint per pass the first one after it does. The same holds for the
// direct path's passes inside a task, as Auto runs them (given a context
// that is not cancelled, so that only Checkpoint can stop them).
func TestChecksumTaskWithoutCheckpoint(t *testing.T) {
	s, _ := newTestServer(t, Config{Workers: 1})
	passes := map[string]func(*cpusched.Task, bool) (int, uint32, error){
		"task": func(task *cpusched.Task, checkpoint bool) (int, uint32, error) {
			return s.checksumTask(task, 5, checkpoint, nil)
		},
		"direct in a task": func(task *cpusched.Task, checkpoint bool) (int, uint32, error) {
			return s.checksumDirect(context.Background(), task, 5, checkpoint, nil)
		},
	}
	for name, run := range passes {
		for _, checkpoint := range []bool{false, true} {
			ctx, cancel := context.WithCancel(context.Background())
			var done int
			var passErr error
			_ = s.sched.Run(ctx, func(task *cpusched.Task) error {
				cancel()
				// Checkpoint sees the cancellation shortly after it happens.
				time.Sleep(50 * time.Millisecond)
				done, _, passErr = run(task, checkpoint)
				return nil
			})
			cancel()
			wantDone := map[bool]int{false: 5, true: 1}[checkpoint]
			if done != wantDone || (passErr != nil) != checkpoint {
				t.Errorf("%s, checkpoint %v: got %d passes (error %v), want %d passes, an error only with Checkpoints", name, checkpoint, done, passErr, wantDone)
			}
		}
	}
}

func TestClosedScheduler(t *testing.T) {
	// After Close the scheduled routes answer 503 with Retry-After (from
	// httpsched); the direct ones still work.
	s, err := NewServer(Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path       string
		wantCode   int
		wantRetry  string
		wantPasses uint64 // sched passes so far
	}{
		{"/checksumWithCpuWorker?n=2", http.StatusServiceUnavailable, "1", 0},
		{"/checksumSmallTaskWithCpuWorker", http.StatusServiceUnavailable, "1", 0},
		{"/checksum?n=2&sched=1", http.StatusServiceUnavailable, "1", 0},
		{"/checksum?n=2", http.StatusOK, "", 0},
	}
	for _, tt := range tests {
		code, h, body := get(t, "GET", hs.URL+tt.path)
		if code != tt.wantCode || h.Get("Retry-After") != tt.wantRetry || s.passesSched.Load() != tt.wantPasses {
			t.Errorf("%s: got %d Retry-After %q (%q), %d task passes; want %d Retry-After %q, %d",
				tt.path, code, h.Get("Retry-After"), body, s.passesSched.Load(), tt.wantCode, tt.wantRetry, tt.wantPasses)
		}
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	_, hs := newTestServer(t, Config{Workers: 1})
	tests := []struct {
		method, path string
		wantCode     int
		wantAllow    string
	}{
		{"GET", "/", http.StatusNotFound, ""},
		{"GET", "/nope", http.StatusNotFound, ""},
		{"GET", "/delay1ms/x", http.StatusNotFound, ""},
		{"POST", "/delay1ms", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"PUT", "/checksum?n=1", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"DELETE", "/stats", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"POST", "/debug/pprof/", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"HEAD", "/delay1ms", http.StatusOK, ""},
		{"HEAD", "/checksum?n=1", http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			code, h, _ := get(t, tt.method, hs.URL+tt.path)
			if code != tt.wantCode || h.Get("Allow") != tt.wantAllow {
				t.Errorf("got %d Allow %q, want %d Allow %q", code, h.Get("Allow"), tt.wantCode, tt.wantAllow)
			}
		})
	}
}

func TestPprof(t *testing.T) {
	_, hs := newTestServer(t, Config{Workers: 1})
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		code, _, body := get(t, "GET", hs.URL+path)
		if code != http.StatusOK || body == "" {
			t.Errorf("%s: got %d with %d bytes, want 200 and a body", path, code, len(body))
		}
	}
}

func TestStats(t *testing.T) {
	_, hs := newTestServer(t, Config{Workers: 1})
	for _, path := range []string{"/checksum?n=3", "/checksum?n=4&sched=1", "/checksumWithCpuWorker?n=5",
		"/checksumSmallTaskWithCpuWorker", "/checksum?n=0", "/delay1ms", "/delay?d=1us"} {
		get(t, "GET", hs.URL+path)
	}
	code, h, body := get(t, "GET", hs.URL+"/stats")
	if code != http.StatusOK || h.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %q, want 200 application/json", code, h.Get("Content-Type"))
	}
	// Every field docs/bench.md names is present.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatalf("/stats is not JSON: %v\n%s", err, body)
	}
	for _, key := range []string{"isolation", "workers", "gomaxprocs", "num_goroutine", "passes",
		"passes_direct", "passes_sched", "requests", "scheduler", "gc"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("/stats lacks %q; got:\n%s", key, body)
		}
	}
	var st Stats
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	counts := []struct {
		name      string
		got, want uint64
	}{
		{"passes", st.Passes, 3 + 4 + 5 + 10},
		{"passes_direct", st.PassesDirect, 3},
		{"passes_sched", st.PassesSched, 4 + 5 + 10},
		{"requests /checksum", st.Requests["/checksum"], 3},
		{"requests /checksumWithCpuWorker", st.Requests["/checksumWithCpuWorker"], 1},
		{"requests /checksumSmallTaskWithCpuWorker", st.Requests["/checksumSmallTaskWithCpuWorker"], 1},
		{"requests /delay1ms", st.Requests["/delay1ms"], 1},
		{"requests /delay", st.Requests["/delay"], 1},
		{"requests /stats", st.Requests["/stats"], 1},
		{"requests /checksumWithoutCpuWorker", st.Requests["/checksumWithoutCpuWorker"], 0},
		{"scheduler.submitted", st.Scheduler.Submitted, 3},
		{"scheduler.completed", st.Scheduler.Completed, 3},
		{"scheduler.classes.normal.submitted", st.Scheduler.Classes["normal"].Submitted, 3},
	}
	for _, c := range counts {
		if c.got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
		}
	}
	if st.Isolation != cpusched.IsolationReserve.String() || st.Workers != 1 || st.Scheduler.Workers != 1 {
		t.Errorf("got isolation %q workers %d, want %q 1", st.Isolation, st.Workers, cpusched.IsolationReserve)
	}
	if st.GOMAXPROCS < 1 || st.NumGoroutine < 1 || len(st.Scheduler.Classes) != 4 {
		t.Errorf("got gomaxprocs %d num_goroutine %d classes %d, want >= 1, >= 1, 4",
			st.GOMAXPROCS, st.NumGoroutine, len(st.Scheduler.Classes))
	}
}

// TestListeningString: the banner says whether threads are raisable only
// in ospriority, the one mode where it matters.
func TestListeningString(t *testing.T) {
	for _, tt := range []struct {
		l    Listening
		want string
	}{
		{Listening{Addr: "127.0.0.1:1", Isolation: cpusched.IsolationNone, Workers: 2, GOMAXPROCS: 2, Raisable: false},
			"listening on http://127.0.0.1:1 (isolation=none workers=2 gomaxprocs=2)"},
		{Listening{Addr: "127.0.0.1:1", Isolation: cpusched.IsolationOSPriority, Workers: 2, GOMAXPROCS: 3, Raisable: false},
			"listening on http://127.0.0.1:1 (isolation=ospriority workers=2 gomaxprocs=3 raisable=false)"},
		{Listening{Addr: "127.0.0.1:1", Isolation: cpusched.IsolationOSPriority, Workers: 2, GOMAXPROCS: 3, Raisable: true},
			"listening on http://127.0.0.1:1 (isolation=ospriority workers=2 gomaxprocs=3 raisable=true)"},
	} {
		if got := tt.l.String(); got != tt.want {
			t.Errorf("%+v: got %q, want %q", tt.l, got, tt.want)
		}
	}
}

func TestStatsCoversEveryField(t *testing.T) {
	// SchedulerStats mirrors cpusched.Stats field by field: a field added to
	// the library must be added here too.
	lib, ours := reflect.TypeFor[cpusched.Stats](), reflect.TypeFor[SchedulerStats]()
	if lib.NumField() != ours.NumField() {
		t.Errorf("got %d fields in SchedulerStats, want %d as cpusched.Stats", ours.NumField(), lib.NumField())
	}
}

func TestIsolationModes(t *testing.T) {
	for _, m := range cpusched.IsolationModes() {
		t.Run(m.String(), func(t *testing.T) {
			s, hs := newTestServer(t, Config{Isolation: m})
			code, _, body := get(t, "GET", hs.URL+"/checksumWithCpuWorker?n=2")
			if code != http.StatusOK {
				t.Errorf("got %d %q, want 200", code, body)
			}
			if st := s.Stats(); st.Isolation != m.String() || st.Workers < 1 {
				t.Errorf("got isolation %q workers %d, want %q and >= 1", st.Isolation, st.Workers, m)
			}
		})
	}
}

func TestNewServerErrors(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{Workers: -1}, "WithWorkers(-1): workers must be in 1..1024"},
		{Config{Workers: 2000}, "1..1024"},
		{Config{Slice: time.Nanosecond}, "slice"},
		{Config{Isolation: cpusched.Isolation(99)}, "99"},
	}
	for _, tt := range tests {
		s, err := NewServer(tt.cfg)
		if err == nil {
			s.Close(context.Background())
			t.Errorf("NewServer(%+v): got nil error, want one containing %q", tt.cfg, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewServer(%+v): got %q, want it to contain %q", tt.cfg, err, tt.want)
		}
	}
}

// TestSummarise: the count, p99 and max of a histogram, and its non-empty
// buckets with infinite bounds written as the other bound.
func TestSummarise(t *testing.T) {
	inf := math.Inf(1)
	h := func(count uint64, maxMS, p99MS float64) Histogram {
		return Histogram{Count: count, MaxMS: maxMS, P99MS: p99MS}
	}
	tests := []struct {
		name        string
		counts      []uint64
		buckets     []float64
		want        Histogram
		wantBuckets []Bucket
	}{
		{"empty", []uint64{0, 0}, []float64{0, 0.001, 0.002}, Histogram{}, nil},
		{"one bucket", []uint64{0, 5, 0}, []float64{0, 0.001, 0.002, 0.003}, h(5, 2, 2), []Bucket{{1, 2, 5}}},
		{"p99 below max", []uint64{99, 0, 1}, []float64{0, 0.001, 0.002, 0.003}, h(100, 3, 1), []Bucket{{0, 1, 99}, {2, 3, 1}}},
		{"p99 at max", []uint64{98, 0, 2}, []float64{0, 0.001, 0.002, 0.003}, h(100, 3, 3), []Bucket{{0, 1, 98}, {2, 3, 2}}},
		{"+Inf clamps to the lower bound", []uint64{1, 1}, []float64{0, 0.5, inf}, h(2, 500, 500), []Bucket{{0, 500, 1}, {500, 500, 1}}},
		{"-Inf first bucket", []uint64{3}, []float64{math.Inf(-1), 0.004}, h(3, 4, 4), []Bucket{{4, 4, 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fh := &metrics.Float64Histogram{Counts: tt.counts, Buckets: tt.buckets}
			if got := summarise(fh); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("summarise: got %+v, want %+v", got, tt.want)
			}
			if got := nonEmptyBuckets(fh); !reflect.DeepEqual(got, tt.wantBuckets) {
				t.Errorf("nonEmptyBuckets: got %+v, want %+v", got, tt.wantBuckets)
			}
		})
	}
}

// TestStatsPauseBuckets: /stats carries the GC pause histograms' buckets,
// whose counts add up to the summary's.
func TestStatsPauseBuckets(t *testing.T) {
	s, _ := newTestServer(t, Config{Workers: 1})
	runtime.GC()
	st := s.Stats()
	for name, h := range map[string]Histogram{"pauses_total": st.GC.Total, "pauses_stopping": st.GC.Stopping} {
		var sum uint64
		for i, b := range h.Buckets {
			sum += b.Count
			if b.Count == 0 || b.HiMS < b.LoMS || i > 0 && b.LoMS < h.Buckets[i-1].HiMS {
				t.Errorf("%s bucket %d: got %+v, want non-empty, in order", name, i, b)
			}
		}
		if h.Count == 0 || sum != h.Count {
			t.Errorf("%s: got buckets summing to %d, count %d; want the same, above 0 after a GC", name, sum, h.Count)
		}
	}
	if st.SchedLatency.Buckets != nil {
		t.Errorf("sched_latency: got %d buckets, want none (only the GC pauses carry them)", len(st.SchedLatency.Buckets))
	}
}

func TestServeShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan Listening, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, "127.0.0.1:0", Config{Workers: 1}, func(l Listening) { ready <- l }) }()
	var l Listening
	select {
	case l = <-ready:
	case err := <-done:
		t.Fatalf("Serve returned before ready: %v", err)
	}
	if strings.HasSuffix(l.Addr, ":0") || l.Workers != 1 || l.GOMAXPROCS < 1 {
		t.Errorf("got %+v, want a real port, 1 worker and GOMAXPROCS >= 1", l)
	}
	wantLine := fmt.Sprintf("listening on http://%s (isolation=reserve workers=1 gomaxprocs=%d)", l.Addr, l.GOMAXPROCS)
	if l.String() != wantLine {
		t.Errorf("got %q, want %q", l, wantLine)
	}
	code, _, _ := get(t, "GET", "http://"+l.Addr+"/checksumWithCpuWorker?n=3")
	if code != http.StatusOK {
		t.Errorf("got %d, want 200", code)
	}
	// A request that is still running when ctx ends completes. (Its own
	// transport: a shared one may dial a spare connection that sends no
	// request, which Shutdown waits 5 s for.)
	inflight := make(chan int, 1)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	go func() {
		resp, err := client.Get("http://" + l.Addr + "/delay?d=200ms")
		if err != nil {
			inflight <- 0
			return
		}
		resp.Body.Close()
		inflight <- resp.StatusCode
	}()
	time.Sleep(50 * time.Millisecond) // let the /delay request arrive
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: got %v, want nil", err)
	}
	if code := <-inflight; code != http.StatusOK {
		t.Errorf("in-flight request: got %d, want 200", code)
	}
	http.DefaultClient.CloseIdleConnections()
	if _, err := http.Get("http://" + l.Addr + "/delay1ms"); err == nil {
		t.Errorf("got a response after shutdown, want a connection error")
	}
}

func TestServeListenError(t *testing.T) {
	err := Serve(context.Background(), "127.0.0.1:-1", Config{}, func(Listening) { t.Error("ready called") })
	if err == nil {
		t.Fatal("got nil error for a bad address, want one")
	}
}

func TestServeCancelsLongRequests(t *testing.T) {
	// Requests that outlive the grace period are cancelled: the task stops
	// at a Checkpoint, the direct loop at its next pass, and nothing leaks.
	s, err := NewServer(Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.serve(ctx, ln, nil, 100*time.Millisecond) }()

	paths := []string{"/checksum?n=1000000&sched=1", "/checksum?n=1000000&sched=0", "/delay?d=10s"}
	finished := make(chan error, len(paths))
	for _, p := range paths {
		go func() {
			resp, err := http.Get("http://" + ln.Addr().String() + p)
			if err == nil {
				resp.Body.Close()
			}
			finished <- err
		}()
	}
	for s.Stats().Scheduler.Started == 0 || s.passesDirect.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "were closed") {
		t.Errorf("serve: got %v, want an error saying connections were closed", err)
	}
	for range paths {
		<-finished // the connection was closed: an error or a 503
	}
	if st := s.Stats(); st.PassesDirect >= MaxPasses || st.PassesSched >= MaxPasses || st.Scheduler.Started != 0 {
		t.Errorf("got %d direct and %d task passes, %d tasks running; want both below %d and none running",
			st.PassesDirect, st.PassesSched, st.Scheduler.Started, MaxPasses)
	}
}

func TestConcurrentRequests(t *testing.T) {
	// Tasks that preempt each other on one worker, direct passes, delays and
	// /stats at once (for the race detector); the counts stay exact.
	s, hs := newTestServer(t, Config{Workers: 1, Slice: 50 * time.Microsecond, Garbage: HeavyGarbage}) // the shortest slice New accepts
	const clients, passes = 6, 40
	errs := make(chan error, 3*clients)
	for i := range clients {
		for _, path := range []string{
			fmt.Sprintf("/checksum?n=%d&sched=1&nice=%d&group=g%d", passes, i-3, i%2),
			fmt.Sprintf("/checksum?n=%d", passes),
			"/delay?d=100us",
		} {
			go func() {
				resp, err := http.Get(hs.URL + path)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("%s: got %d, want 200", path, resp.StatusCode)
					}
				}
				errs <- err
			}()
		}
	}
	for range 3 * clients {
		if err := <-errs; err != nil {
			t.Error(err)
		}
		s.Stats()
	}
	st := s.Stats()
	if st.PassesSched != clients*passes || st.PassesDirect != clients*passes || st.Scheduler.Completed != clients {
		t.Errorf("got %d task passes, %d direct, %d tasks completed; want %d, %d, %d",
			st.PassesSched, st.PassesDirect, st.Scheduler.Completed, clients*passes, clients*passes, clients)
	}
}
