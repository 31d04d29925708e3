package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newServer starts an httptest server that is closed when the test ends.
func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func hello(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("hello")) }

func TestClosedLoopCountsExactlyN(t *testing.T) {
	var served atomic.Int64
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		hello(w, r)
	})
	for _, c := range []int{1, 4, 7} {
		res, err := Run(context.Background(), Config{URL: srv.URL, Concurrency: c, Requests: 100})
		if err != nil {
			t.Fatalf("c=%d: Run: %v", c, err)
		}
		if res.Completed != 100 || res.StatusCodes[200] != 100 || res.FailedTotal() != 0 {
			t.Errorf("c=%d: got completed %d, 200s %d, failed %v; want 100, 100, 0",
				c, res.Completed, res.StatusCodes[200], res.Failed)
		}
		if got := res.Latency.TotalCount(); got != 100 {
			t.Errorf("c=%d: got %d latencies, want 100", c, got)
		}
		if res.Bytes != 500 {
			t.Errorf("c=%d: got %d body bytes, want 500", c, res.Bytes)
		}
	}
	if got := served.Load(); got != 300 {
		t.Errorf("server saw %d requests, want 300", got)
	}
}

// closedURL returns a loopback URL on which nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/"
}

func TestStatusesAndFailures(t *testing.T) {
	var n atomic.Int64
	alternate := func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) % 3 {
		case 0:
			w.WriteHeader(http.StatusNotFound)
		case 1:
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		default:
			hello(w, r)
		}
	}
	hangUp := func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	shortBody := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.Write([]byte("only ten.."))
	}
	stall := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	tests := []struct {
		name       string
		handler    http.HandlerFunc // nil: nothing listens
		timeout    time.Duration
		wantDone   int64
		wantNon2xx int64
		wantCodes  map[int]int64
		wantFailed map[string]int64
	}{
		{name: "statuses", handler: alternate, wantDone: 9, wantNon2xx: 6,
			wantCodes: map[int]int64{200: 3, 302: 3, 404: 3}},
		{name: "server hangs up", handler: hangUp, wantFailed: map[string]int64{FailRead: 9}},
		{name: "short body", handler: shortBody, wantFailed: map[string]int64{FailRead: 9}},
		{name: "timeout", handler: stall, timeout: 50 * time.Millisecond, wantFailed: map[string]int64{FailTimeout: 9}},
		{name: "connection refused", wantFailed: map[string]int64{FailConnect: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := closedURL(t)
			if tt.handler != nil {
				url = newServer(t, tt.handler).URL
			}
			res, err := Run(context.Background(), Config{URL: url, Concurrency: 3, Requests: 9, Timeout: tt.timeout})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Completed != tt.wantDone || res.Non2xx != tt.wantNon2xx {
				t.Errorf("got completed %d, non-2xx %d; want %d, %d", res.Completed, res.Non2xx, tt.wantDone, tt.wantNon2xx)
			}
			for _, k := range failKinds {
				if got, want := res.Failed[k], tt.wantFailed[k]; got != want {
					t.Errorf("got %d %q failures, want %d (all: %v)", got, k, want, res.Failed)
				}
			}
			for code, want := range tt.wantCodes {
				if got := res.StatusCodes[code]; got != want {
					t.Errorf("got %d responses with status %d, want %d", got, code, want)
				}
			}
			if got := res.Latency.TotalCount(); got != tt.wantDone {
				t.Errorf("got %d latencies, want %d", got, tt.wantDone)
			}
		})
	}
}

// countAtLeast returns how many recorded values of h are >= v.
func countAtLeast(h *hdrhistogram.Histogram, v int64) int64 {
	var n int64
	for _, b := range h.Distribution() {
		if b.From >= v {
			n += b.Count
		}
	}
	return n
}

// TestOpenLoopChargesStallFromDueTime runs at 100 req/s for 300 ms with one
// connection against a server that stalls its first request for 100 ms. The
// requests due at 0, 10, ..., 40 ms all wait for the stall, so at least five
// latencies are >= 50 ms. A closed-loop measurement (from send time) would
// show only one.
func TestOpenLoopChargesStallFromDueTime(t *testing.T) {
	const stall = 100 * time.Millisecond
	var first atomic.Bool
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(false, true) {
			time.Sleep(stall)
		}
		hello(w, r)
	})
	res, err := Run(context.Background(), Config{
		URL: srv.URL, Concurrency: 1, Rate: 100, Duration: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := res.Completed + res.FailedTotal() + res.Unfinished; got != 30 {
		t.Errorf("got completed+failed+unfinished = %d+%d+%d = %d, want 30 requests due",
			res.Completed, res.FailedTotal(), res.Unfinished, got)
	}
	if res.Completed < 10 {
		t.Errorf("got %d completed, want >= 10", res.Completed)
	}
	if got := res.Latency.Max(); got < stall.Microseconds()*9/10 {
		t.Errorf("got max latency %d us, want >= %d us (the stall)", got, stall.Microseconds()*9/10)
	}
	if got := countAtLeast(res.Latency, 50_000); got < 5 {
		t.Errorf("got %d latencies >= 50 ms, want >= 5 (requests due during the stall)", got)
	}
}

// TestOpenLoopDrain runs at 100 req/s for 200 ms against a server that
// takes 50 ms per request: with Drain every one of the 20 requests due
// completes, including those still in flight at 200 ms; without it, those
// are abandoned.
func TestOpenLoopDrain(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
		hello(w, r)
	})
	tests := []struct {
		drain          bool
		wantCompleted  int64 // -1: fewer than 20
		wantUnfinished int64 // -1: more than 0
	}{
		{true, 20, 0},
		{false, -1, -1},
	}
	for _, tt := range tests {
		res, err := Run(context.Background(), Config{
			URL: srv.URL, Concurrency: 20, Rate: 100, Duration: 200 * time.Millisecond, Drain: tt.drain,
		})
		if err != nil {
			t.Fatalf("Drain=%v: Run: %v", tt.drain, err)
		}
		if tt.wantCompleted >= 0 && res.Completed != tt.wantCompleted || tt.wantCompleted < 0 && res.Completed >= 20 {
			t.Errorf("Drain=%v: got %d completed, want %s", tt.drain, res.Completed, want(tt.wantCompleted, "fewer than 20"))
		}
		if tt.wantUnfinished >= 0 && res.Unfinished != tt.wantUnfinished || tt.wantUnfinished < 0 && res.Unfinished == 0 {
			t.Errorf("Drain=%v: got %d unfinished, want %s", tt.drain, res.Unfinished, want(tt.wantUnfinished, "some"))
		}
		if res.Elapsed != 200*time.Millisecond {
			t.Errorf("Drain=%v: got elapsed %v, want the 200ms window", tt.drain, res.Elapsed)
		}
	}
}

// want describes an expected count: n, or the text when n is -1.
func want(n int64, text string) string {
	if n < 0 {
		return text
	}
	return fmt.Sprint(n)
}

func TestOpenLoopDueCount(t *testing.T) {
	tests := []struct {
		t    time.Duration
		rate float64
		want int64
	}{
		{300 * time.Millisecond, 100, 30},
		{time.Second, 3, 3},
		{time.Second, 0.5, 1},
		{0, 100, 0},
		{time.Millisecond, 1e6, 1000},
	}
	for _, tt := range tests {
		if got := dueBefore(tt.t, tt.rate); got != tt.want {
			t.Errorf("dueBefore(%v, %v): got %d, want %d", tt.t, tt.rate, got, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := Config{URL: "http://127.0.0.1:8080/x", Concurrency: 4, Requests: 10}
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr string // "" means valid
	}{
		{"valid", func(c *Config) {}, ""},
		{"valid localhost https", func(c *Config) { c.URL = "https://localhost/" }, ""},
		{"valid ipv6 loopback", func(c *Config) { c.URL = "http://[::1]:9/" }, ""},
		{"valid 127/8", func(c *Config) { c.URL = "http://127.3.2.1/" }, ""},
		{"valid open loop", func(c *Config) { c.Requests, c.Duration, c.Rate = 0, time.Second, 50 }, ""},
		{"valid remote allowed", func(c *Config) { c.URL, c.AllowRemote = "http://192.0.2.1/", true }, ""},
		{"empty URL", func(c *Config) { c.URL = "" }, "URL is required"},
		{"bad scheme", func(c *Config) { c.URL = "ftp://127.0.0.1/" }, "scheme must be http or https"},
		{"no scheme", func(c *Config) { c.URL = "localhost/x" }, "scheme must be http or https"},
		{"unparsable", func(c *Config) { c.URL = "127.0.0.1:80" }, "load: URL:"},
		{"missing host", func(c *Config) { c.URL = "http:///path" }, "no host"},
		{"non-loopback IP", func(c *Config) { c.URL = "http://192.0.2.1/" }, "not a loopback"},
		{"non-loopback IPv6", func(c *Config) { c.URL = "http://[2001:db8::1]/" }, "not a loopback"},
		{"unspecified address", func(c *Config) { c.URL = "http://0.0.0.0/" }, "not a loopback"},
		{"bad method", func(c *Config) { c.Method = "GE T" }, "Method (-m)"},
		{"c zero", func(c *Config) { c.Concurrency = 0 }, "Concurrency (-c) must be in 1..10000, got 0"},
		{"c too big", func(c *Config) { c.Concurrency = 10001 }, "Concurrency (-c) must be in 1..10000"},
		{"n negative", func(c *Config) { c.Requests = -1 }, "Requests (-n)"},
		{"n and d", func(c *Config) { c.Duration = time.Second }, "exactly one of Requests (-n) or Duration (-d)"},
		{"neither n nor d", func(c *Config) { c.Requests = 0 }, "exactly one of Requests (-n"},
		{"d negative", func(c *Config) { c.Requests, c.Duration = 0, -time.Second }, "Duration (-d) must be > 0"},
		{"drain closed loop", func(c *Config) { c.Drain = true }, "Drain needs Rate (-rate > 0)"},
		{"drain open loop", func(c *Config) { c.Requests, c.Duration, c.Rate, c.Drain = 0, time.Second, 50, true }, ""},
		{"rate without duration", func(c *Config) { c.Rate = 10 }, "Rate (-rate) needs Duration (-d > 0)"},
		{"rate negative", func(c *Config) { c.Requests, c.Duration, c.Rate = 0, time.Second, -1 }, "Rate (-rate) must be in (0, 1e+06]"},
		{"rate too high", func(c *Config) { c.Requests, c.Duration, c.Rate = 0, time.Second, 1e300 }, "Rate (-rate) must be in (0, 1e+06] requests/s (or 0 for closed loop), got 1e+300"},
		{"timeout negative", func(c *Config) { c.Timeout = -time.Second }, "Timeout (-timeout) must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			err := c.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got error %q, want nil", err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("got nil error, want one containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("got error %q, want one containing %q", err, tt.wantErr)
			}
			if strings.Contains(tt.wantErr, "loopback") && !errors.Is(err, ErrNotLoopback) {
				t.Errorf("got error %v, want one wrapping ErrNotLoopback", err)
			}
		})
	}
}

// TestValidateFlags: the CLI's errors name the flags alone, refuse a flag
// given as 0 where Validate reads 0 as not set, and report the flags'
// problems before the URL's.
func TestValidateFlags(t *testing.T) {
	ok := Config{URL: "http://127.0.0.1:8080/x", Concurrency: 4, Requests: 10, Timeout: DefaultTimeout}
	tests := []struct {
		name    string
		edit    func(*Config)
		given   string // the flags on the command line, space-separated
		wantErr string // the whole error; "" means valid
	}{
		{"valid", func(c *Config) {}, "n", ""},
		{"c zero", func(c *Config) { c.Concurrency = 0 }, "c n", "load: -c must be in 1..10000, got 0"},
		{"n zero given", func(c *Config) { c.Requests = 0 }, "n", "load: -n must be >= 1, got 0"},
		{"n zero given with d", func(c *Config) { c.Requests, c.Duration = 0, time.Second }, "n d", "load: -n must be >= 1, got 0"},
		{"d zero given", func(c *Config) { c.Duration = 0 }, "n d", "load: -d must be > 0, got 0s"},
		{"n and d", func(c *Config) { c.Duration = time.Second }, "n d", "load: give exactly one of -n or -d, not both"},
		{"neither n nor d", func(c *Config) { c.Requests = 0 }, "", "load: give exactly one of -n COUNT or -d DURATION"},
		{"rate zero given", func(c *Config) { c.Requests, c.Duration = 0, time.Second }, "d rate", "load: -rate must be in (0, 1e+06] requests/s, got 0"},
		{"rate not given", func(c *Config) { c.Requests, c.Duration = 0, time.Second }, "d", ""},
		{"rate without d", func(c *Config) { c.Rate = 10 }, "n rate", "load: -rate needs -d DURATION (open loop runs for a time, not a count)"},
		{"timeout zero given", func(c *Config) { c.Timeout = 0 }, "n timeout", "load: -timeout must be > 0, got 0s"},
		{"flags before the URL", func(c *Config) { c.URL, c.Concurrency = "ftp://127.0.0.1/", 0 }, "c n", "load: -c must be in 1..10000, got 0"},
		{"bad URL", func(c *Config) { c.URL = "ftp://127.0.0.1/" }, "n", `load: URL "ftp://127.0.0.1/": scheme must be http or https, got "ftp"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			given := strings.Fields(tt.given)
			err := c.ValidateFlags(func(flag string) bool { return slices.Contains(given, flag) })
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got error %q, want nil", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Errorf("got error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestDialRefusesRemote checks the second guard: the client Run builds will
// not connect to a non-loopback address even if Validate was bypassed. The
// check runs before connect(2), so nothing is sent.
func TestDialRefusesRemote(t *testing.T) {
	client, tr := newClient(Config{Concurrency: 1, Timeout: time.Second})
	defer tr.CloseIdleConnections()
	resp, err := client.Get("http://192.0.2.1:9/")
	if err == nil {
		resp.Body.Close()
		t.Fatal("got nil error dialing 192.0.2.1, want ErrNotLoopback")
	}
	if !errors.Is(err, ErrNotLoopback) {
		t.Errorf("got error %v, want one wrapping ErrNotLoopback", err)
	}
	if got := classify(err, false); got != FailConnect {
		t.Errorf("classify: got %q, want %q", got, FailConnect)
	}
}

func TestRunInvalidConfigSendsNothing(t *testing.T) {
	var served atomic.Int64
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { served.Add(1) })
	res, err := Run(context.Background(), Config{URL: srv.URL, Concurrency: 0, Requests: 1})
	if err == nil || res != nil {
		t.Errorf("got (%v, %v), want (nil, error)", res, err)
	}
	if served.Load() != 0 {
		t.Errorf("server saw %d requests, want 0", served.Load())
	}
}

func TestCancelReturnsPartialResult(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		cfg     Config
	}{
		{"closed loop, fast server", hello, Config{Concurrency: 4, Requests: 1 << 30}},
		{"closed loop, stalled server", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, Config{Concurrency: 4, Duration: time.Minute}},
		{"open loop, stalled server", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, Config{Concurrency: 2, Duration: time.Minute, Rate: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.URL = newServer(t, tt.handler).URL
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			begin := time.Now()
			res, err := Run(ctx, cfg)
			took := time.Since(begin)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("got error %v, want context.DeadlineExceeded", err)
			}
			if res == nil {
				t.Fatal("got nil result, want the partial result")
			}
			if took > 10*time.Second {
				t.Errorf("Run took %v after a 200ms context, want prompt return", took)
			}
			if res.Completed+res.FailedTotal()+res.Unfinished == 0 {
				t.Errorf("got an empty result %+v, want some requests counted", res)
			}
			if res.FailedTotal() != 0 {
				t.Errorf("got failures %v, want none (cut-off requests are unfinished)", res.Failed)
			}
		})
	}
}

func TestProgressLine(t *testing.T) {
	old := progressInterval
	progressInterval = 20 * time.Millisecond
	defer func() { progressInterval = old }()
	srv := newServer(t, hello)
	var buf bytes.Buffer
	_, err := Run(context.Background(), Config{URL: srv.URL, Concurrency: 2, Duration: 150 * time.Millisecond, Progress: &buf})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	out := buf.String()
	if !strings.Contains(out, "completed") || !strings.Contains(out, "req/s") || !strings.HasSuffix(out, "\n") {
		t.Errorf("got progress output %q, want lines with completed and req/s ending in a newline", out)
	}
}

func TestSummaryAndText(t *testing.T) {
	h := hdrhistogram.New(latencyMinUs, latencyMaxUs, latencySigFigs)
	for _, us := range []int64{1000, 2000, 3000, 4000} {
		h.RecordValue(us)
	}
	res := &Result{
		Completed:   4,
		Failed:      map[string]int64{FailConnect: 1, FailTimeout: 0, FailRead: 2, FailOther: 0},
		Non2xx:      1,
		StatusCodes: map[int]int64{200: 3, 503: 1},
		Bytes:       4096,
		Elapsed:     2 * time.Second,
		Latency:     h,
	}
	s := res.Summary()
	checks := []struct {
		name      string
		got, want float64
	}{
		{"Failed", float64(s.Failed), 3},
		{"RPS", s.RPS, 2},
		{"TransferKBps", s.TransferKBps, 2},
		{"Elapsed", s.Elapsed, 2},
		{"MinMs", s.MinMs, 1},
		{"MaxMs", s.MaxMs, 4},
		{"MeanMs", s.MeanMs, 2.5},
		{"P50Ms", s.P50Ms, 2},
		{"StatusCodes[200]", float64(s.StatusCodes["200"]), 3},
		{"FailedByKind[read]", float64(s.FailedByKind[FailRead]), 2},
	}
	for _, c := range checks {
		if d := c.got - c.want; d > 0.01 || d < -0.01 {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	var buf bytes.Buffer
	if err := res.WriteText(&buf); err != nil {
		t.Fatalf("WriteText: %v", err)
	}
	text := strings.Join(strings.Fields(buf.String()), " ") // ignore alignment
	for _, want := range []string{
		"Completed requests: 4", "Failed requests: 3 (connect 1, timeout 0, read 2, other 0)",
		"Non-2xx responses: 1", "Requests per second: 2.00", "Latency (ms):", "99.9%", "503 1",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text summary lacks %q; got:\n%s", want, buf.String())
		}
	}
}
