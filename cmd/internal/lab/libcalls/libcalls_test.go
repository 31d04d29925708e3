package libcalls

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cpusched/cpusched/cmd/internal/hogproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func validConfig() Config {
	return Config{Runs: 1, Kinds: []string{KindGzip}, Clients: 1, Rate: 10, Window: time.Second, Cost: MinCost}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*Config)
		wantErr string
	}{
		{"valid", func(*Config) {}, ""},
		{"all kinds, the largest values", func(c *Config) {
			c.Kinds, c.Runs, c.Clients, c.Rate, c.Window, c.Warmup, c.Cost = Kinds, MaxRuns, MaxClients, MaxRate, MaxWindow, MaxWarmup, MaxCost
		}, ""},
		{"no kinds", func(c *Config) { c.Kinds = nil }, "-kinds must not be empty (valid: gzip, bcrypt)"},
		{"unknown kind", func(c *Config) { c.Kinds = []string{"zstd"} }, `-kinds: unknown kind "zstd" (valid: gzip, bcrypt)`},
		{"kind twice", func(c *Config) { c.Kinds = []string{"gzip", "bcrypt", "gzip"} }, `-kinds: "gzip" is listed twice`},
		{"runs 0", func(c *Config) { c.Runs = 0 }, "-runs must be in 1..20, got 0"},
		{"runs 21", func(c *Config) { c.Runs = 21 }, "-runs must be in 1..20, got 21"},
		{"clients 0", func(c *Config) { c.Clients = 0 }, "-clients must be in 1..256, got 0"},
		{"rate 0", func(c *Config) { c.Rate = 0 }, "-rate must be in (0, 10000] requests/s, got 0"},
		{"rate NaN", func(c *Config) { c.Rate = math.NaN() }, "-rate must be in (0, 10000] requests/s, got NaN"},
		{"rate too high", func(c *Config) { c.Rate = 20000 }, "-rate must be in (0, 10000] requests/s, got 20000"},
		{"window short", func(c *Config) { c.Window = time.Millisecond }, "-window must be in 200ms..10m0s, got 1ms"},
		{"warmup negative", func(c *Config) { c.Warmup = -time.Second }, "-warmup must be in 0s..1m0s, got -1s"},
		{"cost 3", func(c *Config) { c.Cost = 3 }, "-cost must be in 4..16, got 3"},
		{"cost 17", func(c *Config) { c.Cost = 17 }, "-cost must be in 4..16, got 17"},
	}
	for _, tt := range tests {
		c := validConfig()
		tt.mod(&c)
		err := c.Validate()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: got error %v, want none", tt.name, err)
		case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
			t.Errorf("%s: got error %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	c := validConfig()
	c.Runs = 0
	if _, err := Run(context.Background(), c); err == nil || !strings.Contains(err.Error(), "-runs") {
		t.Errorf("Run with -runs 0: got %v, want the -runs error", err)
	}
	if _, err := Run(context.Background(), validConfig()); err == nil || !strings.Contains(err.Error(), "Command is nil") {
		t.Errorf("Run without a Command: got %v, want an error naming it", err)
	}
}

func TestNewLauncher(t *testing.T) {
	old := geteuid
	t.Cleanup(func() { geteuid = old })
	tests := []struct {
		euid       int
		privileged bool
		wantErr    string
		wantWrap   bool
		wantServer string
	}{
		{1000, true, "-privileged keeps root's privileges, but this is uid 1000", false, ""},
		{1000, false, "", false, "unprivileged ("},
		{0, true, "", false, "privileged (root)"},
		{0, false, "", runtime.GOOS == "linux", ""},
	}
	for _, tt := range tests {
		geteuid = func() int { return tt.euid }
		l, err := newLauncher(tt.privileged)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("euid %d, privileged %v: got %v, want an error containing %q", tt.euid, tt.privileged, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("euid %d, privileged %v: %v", tt.euid, tt.privileged, err)
		}
		if l.asService != tt.wantWrap || !strings.HasPrefix(l.server, tt.wantServer) {
			t.Errorf("euid %d, privileged %v: got asService %v, server %q; want %v and a server starting %q",
				tt.euid, tt.privileged, l.asService, l.server, tt.wantWrap, tt.wantServer)
		}
		cmd := exec.Command("/bin/true", "a")
		if err := l.wrap(cmd); err != nil || l.asService != (len(cmd.Args) > 2) {
			t.Errorf("euid %d: wrap gave %q, %v", tt.euid, cmd.Args, err)
		}
		if err := l.close(); err != nil {
			t.Error(err)
		}
	}
}

func TestPayload(t *testing.T) {
	p := Payload()
	if len(p) != PayloadSize {
		t.Fatalf("len(Payload()): got %d, want %d", len(p), PayloadSize)
	}
	if !bytes.Equal(p, Payload()) {
		t.Error("Payload() differs from one call to the next")
	}
	n, err := compress(p)
	if err != nil {
		t.Fatal(err)
	}
	// Moderately compressible: not text a dictionary swallows, not noise.
	if ratio := float64(len(p)) / float64(n); ratio < 3 || ratio > 8 {
		t.Errorf("gzip ratio: got %.2f, want 3..8", ratio)
	}
}

func TestCreditCalls(t *testing.T) {
	calls := []call{
		{KindGzip, 0, 2},      // half inside [1, 3]
		{KindGzip, 1.5, 2.5},  // inside
		{KindGzip, 2.5, 4.5},  // a quarter inside
		{KindBcrypt, 0, 0.5},  // before
		{KindBcrypt, 3.5, 4},  // after
		{KindBcrypt, 0, 4},    // spans the window: half of it
		{KindBcrypt, 2, 2},    // took no measurable time, inside
		{KindBcrypt, 0.9, 1},  // before
		{KindBcrypt, 3.01, 4}, // after
	}
	got := creditCalls(calls, 1, 3).Credit
	want := map[string]float64{KindGzip: 0.5 + 1 + 0.25, KindBcrypt: 0.5 + 1}
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-9 {
			t.Errorf("credit of %s: got %v, want %v", k, got[k], w)
		}
	}
}

// serveInProcess runs Serve with cfg in this process until the test ends
// and returns its Hello and a GET of a path that returns the status and
// the body.
func serveInProcess(t *testing.T, cfg ServeConfig) (Hello, func(path string) (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, pw); pw.Close() }()
	hellos := make(chan Hello, 1)
	go func() {
		var h Hello
		br := bufio.NewReader(pr)
		line, _ := br.ReadBytes('\n')
		_ = json.Unmarshal(line, &h)
		hellos <- h
		io.Copy(io.Discard, br)
	}()
	var hello Hello
	select {
	case hello = <-hellos:
	case err := <-done:
		t.Fatalf("Serve returned early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no Hello")
	}
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve after cancel: got %v, want nil", err)
		}
	})
	base := "http://" + hello.Addr
	return hello, func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

// TestServe runs a server in this process (not the floor's, which would
// make the test's own threads SCHED_IDLE) and checks each route.
func TestServe(t *testing.T) {
	hello, get := serveInProcess(t, ServeConfig{Addr: "127.0.0.1:0", Cost: MinCost})
	if hello.Addr == "" || hello.Isolation == "" || hello.Workers < 1 {
		t.Fatalf("Hello: got %+v, want an address, an isolation mode and workers", hello)
	}
	for _, tt := range []struct{ path, want string }{
		{pathFast, "slept 1ms\n"},
		{pathDirect + KindGzip, "gzip 2097152 -> "},
		{pathSched + KindGzip, "gzip 2097152 -> "},
		{pathDirect + KindBcrypt, "bcrypt $2a$04$"},
		{pathSched + KindBcrypt, "bcrypt $2a$04$"},
	} {
		if code, body := get(tt.path); code != 200 || !strings.HasPrefix(body, tt.want) {
			t.Errorf("GET %s: got %d %q, want 200 and a body starting %q", tt.path, code, body, tt.want)
		}
	}
	code, body := get(pathStats)
	var c Count
	if err := json.Unmarshal([]byte(body), &c); err != nil || code != 200 {
		t.Fatalf("GET %s: got %d %q (%v)", pathStats, code, body, err)
	}
	if c.Completed[KindGzip] != 2 || c.Completed[KindBcrypt] != 2 || c.InFlight != 0 || c.UptimeS <= 0 || c.Routes != nil {
		t.Errorf("stats: got %+v, want 2 calls of each kind, none in flight, no Auto routes", c)
	}
	code, body = get(fmt.Sprintf("%s?from=0&to=%g", pathCalls, c.UptimeS))
	var calls Calls
	if err := json.Unmarshal([]byte(body), &calls); err != nil || code != 200 {
		t.Fatalf("GET %s: got %d %q (%v)", pathCalls, code, body, err)
	}
	if math.Abs(calls.Credit[KindGzip]-2) > 1e-9 || math.Abs(calls.Credit[KindBcrypt]-2) > 1e-9 {
		t.Errorf("calls since the start: got %v, want 2 of each kind", calls.Credit)
	}
	for _, q := range []string{"", "?from=2&to=1", "?from=x&to=1"} {
		if code, body := get(pathCalls + q); code != http.StatusBadRequest || !strings.Contains(body, "want from and to") {
			t.Errorf("GET %s%s: got %d %q, want 400 saying what it wants", pathCalls, q, code, body)
		}
	}
	if code, _ := get(pathDirect + "zstd"); code != http.StatusNotFound {
		t.Errorf("GET %szstd: got %d, want 404", pathDirect, code)
	}
}

// TestServeAuto runs the auto server in this process: its routes are the
// plain server's but the scheduled ones, and /stats gives Auto's routes,
// the gzip call's (tens of milliseconds of CPU) heavy from its first
// request and the probe's (a sleep) light.
func TestServeAuto(t *testing.T) {
	hello, get := serveInProcess(t, ServeConfig{Addr: "127.0.0.1:0", Cost: MinCost, Auto: true})
	if hello.Isolation == "" || hello.Workers < 1 || hello.IdleThreads != 0 {
		t.Fatalf("Hello: got %+v, want an isolation mode and workers", hello)
	}
	for _, tt := range []struct {
		path, want string
		code       int
	}{
		{pathFast, "slept 1ms\n", 200},
		{pathDirect + KindGzip, "gzip 2097152 -> ", 200},
		{pathDirect + KindGzip, "gzip 2097152 -> ", 200},
		{pathDirect + KindBcrypt, "bcrypt $2a$04$", 200},
		{pathSched + KindGzip, "404", http.StatusNotFound},
	} {
		if code, body := get(tt.path); code != tt.code || !strings.HasPrefix(body, tt.want) {
			t.Errorf("GET %s: got %d %q, want %d and a body starting %q", tt.path, code, body, tt.code, tt.want)
		}
	}
	_, body := get(pathStats)
	var c Count
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatalf("GET %s: %q: %v", pathStats, body, err)
	}
	if c.Completed[KindGzip] != 2 || c.Completed[KindBcrypt] != 1 || c.InFlight != 0 {
		t.Errorf("stats: got %+v, want 2 gzip and 1 bcrypt calls, none in flight", c)
	}
	routes := map[string]AutoRoute{}
	for _, r := range c.Routes {
		routes[r.Route] = r
	}
	if r, ok := routes["GET "+pathDirect+KindGzip]; !ok || r.Requests != 2 || r.Sampled == 0 {
		t.Errorf("route GET %s%s: got %+v (routes %+v), want 2 requests, sampled", pathDirect, KindGzip, r, c.Routes)
	} else if runtime.GOOS == "linux" && (!r.Heavy || r.CPUMs <= 0) {
		t.Errorf("route GET %s%s: got %+v, want heavy with its CPU", pathDirect, KindGzip, r)
	}
	if r, ok := routes["GET "+pathFast]; !ok || r.Heavy || r.Requests != 1 {
		t.Errorf("route GET %s: got %+v (routes %+v), want light, 1 request", pathFast, r, c.Routes)
	}
}

func TestServeRefusesBadConfig(t *testing.T) {
	err := Serve(context.Background(), ServeConfig{Addr: "127.0.0.1:0", Cost: 40}, io.Discard)
	if err == nil || err.Error() != "-cost must be in 4..16, got 40" {
		t.Errorf("-cost 40: got %v, want the -cost error", err)
	}
	err = Serve(context.Background(), ServeConfig{Addr: "127.0.0.1:0", Cost: MinCost, Floor: true, Auto: true}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-floor and -auto exclude each other") {
		t.Errorf("-floor -auto: got %v, want an error naming both", err)
	}
}

func TestChildUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"hog"}, {"serve", "-cost", "2"}, {"serve", "extra"}, {"serve", "-nope"}, {"serve", "-floor", "-auto"}} {
		if err := child(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("child %q: got nil, want a usage error", args)
		}
	}
}

func TestFillMediansTargets(t *testing.T) {
	step := func(name string, p99 float64, ops ...float64) StepResult {
		s := StepResult{Step: name}
		s.Probe.P99Ms, s.Probe.RPS = p99, 200
		for i, o := range ops {
			s.Heavy = append(s.Heavy, KindResult{Kind: Kinds[i], OpsPerS: o})
		}
		return s
	}
	// Auto's p99 over sched's: 1.5, 1, 1.2; over the floor's, in run 1
	// only: 1.8.
	runs := []RunResult{
		{Run: 1, Steps: []StepResult{step(StepIdle, 2), step(StepDirect, 100, 10, 20), step(StepSched, 2.4, 9.5, 20),
			step(StepAuto, 3.6, 10, 20), step(StepFloor, 2, 10, 20)}},
		{Run: 2, Steps: []StepResult{step(StepIdle, 4), step(StepDirect, 100, 10, 10), step(StepSched, 8, 8, 10), step(StepAuto, 8, 10, 10)}},
		{Run: 3, Steps: []StepResult{step(StepIdle, 3), step(StepDirect, 100, 20, 10), step(StepSched, 3.9, 19, 12), step(StepAuto, 4.68, 10, 10)}},
	}
	for i := range runs {
		runs[i].Auto = &Hello{Isolation: "ospriority", Workers: 2}
		runs[i].fill()
	}
	runs[0].Steps[3].Routes = []AutoRoute{{Route: "GET /direct/gzip", Heavy: true, CPUMs: 131, Requests: 80, Sampled: 23}, {Route: "GET /fast", CPUMs: 0.02, Requests: 2600, Sampled: 84}}
	if a := runs[0].Step(StepAuto); math.Abs(a.P99XSched-1.5) > 1e-9 || math.Abs(a.P99XFloor-1.8) > 1e-9 || runs[1].Step(StepAuto).P99XFloor != 0 {
		t.Errorf("auto: got p99 x sched %v, x floor %v (run 2: %v); want 1.5, 1.8 (0)", a.P99XSched, a.P99XFloor, runs[1].Step(StepAuto).P99XFloor)
	}
	s := runs[0].Step(StepSched)
	if s.P99XIdle != 1.2 || *s.Kind(KindGzip).PctOfDirect != 95 || *s.Kind(KindBcrypt).PctOfDirect != 100 {
		t.Fatalf("run 1 sched: got p99 x idle %v, pcts %v %v; want 1.2, 95, 100", s.P99XIdle, *s.Heavy[0].PctOfDirect, *s.Heavy[1].PctOfDirect)
	}
	if runs[0].Step(StepDirect).Kind(KindGzip).PctOfDirect != nil {
		t.Error("the direct step has a % of direct")
	}
	m := medians(runs, Kinds)
	if len(m) != 5 || m[2].Step != StepSched || m[3].Step != StepAuto || m[4].Step != StepFloor {
		t.Fatalf("medians: got %d steps, want idle, direct, sched, auto, floor", len(m))
	}
	if math.Abs(m[3].P99XSched-1.2) > 1e-9 || math.Abs(m[3].P99XFloor-1.8) > 1e-9 || m[3].Runs != 3 || m[4].Runs != 1 {
		t.Errorf("auto medians: got %+v, want p99 x sched 1.2, x floor 1.8 (run 1 alone), 3 runs", m[3])
	}
	// Runs' ratios: p99 1.2, 2, 1.3; gzip 95%, 80%, 95%; bcrypt 100%, 100%, 120%.
	if m[2].P99XIdle != 1.3 || *m[2].Heavy[0].PctOfDirect != 95 || *m[2].Heavy[1].PctOfDirect != 100 || m[0].P99Ms != 3 {
		t.Errorf("sched medians: got %+v (idle p99 %v), want p99 x idle 1.3, gzip 95%%, bcrypt 100%%, idle p99 3", m[2], m[0].P99Ms)
	}
	got := targets(runs, Kinds)
	want := []Target{
		{What: "gzip calls through httpsched, % of direct", Median: 95, Limit: 90, Met: true},
		{What: "bcrypt calls through httpsched, % of direct", Median: 100, Limit: 90, Met: true},
		{What: "probe p99 beside them, x idle", Median: 1.3, Limit: 1.5, AtMost: true, Met: true},
		{What: "probe p99 with the whole server under httpsched.Auto, x sched", Median: 1.2, Limit: 1.5, AtMost: true, Met: true},
	}
	if len(got) != len(want) {
		t.Fatalf("targets: got %d, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.What != w.What || math.Abs(g.Median-w.Median) > 1e-9 || g.Limit != w.Limit || g.AtMost != w.AtMost || g.Met != w.Met || len(g.Values) != 3 {
			t.Errorf("target %d: got %+v, want %+v with 3 values", i, g, w)
		}
	}
	// A missed one: the p99 of run 2 alone would be 2x.
	if tg := targets(runs[1:2], Kinds); tg[2].Met || tg[0].Met {
		t.Errorf("run 2 alone: got %+v, want gzip (80%%) and p99 (2x) missed", tg)
	}
	// Auto's target needs every run's auto step.
	noAuto := slices.Clone(runs)
	noAuto[2].Steps = noAuto[2].Steps[:3]
	if tg := targets(noAuto, Kinds); len(tg) != 3 {
		t.Errorf("a run without auto: got %d targets, want 3 (no auto target)", len(tg))
	}
	doc := newDocument(Config{Runs: 3, Kinds: Kinds, Clients: 8, Rate: 200, Window: time.Second, Cost: 10},
		&Results{Server: "test", Runs: runs}, time.Minute)
	var table bytes.Buffer
	if err := doc.writeTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"median  sched", "median  auto", "95%", "target: probe p99 beside them, x idle <= 1.5: median 1.30 of 1.20, 2.00, 1.30, met",
		"httpsched.Auto(s, mux) over its own cpusched.New() (ospriority, 2 workers)",
		"probe p99 x sched: median 1.20x of 1.50x, 1.00x, 1.20x; x floor: median 1.80x of 1.80x, -, -",
		"run 1 routes, CPU per request: GET /direct/gzip heavy 131ms (23 of 80 sampled, 0 moves); GET /fast light 0.0200ms (84 of 2600 sampled, 0 moves)",
		"run 2 routes, CPU per request: none reported",
		"target: probe p99 with the whole server under httpsched.Auto, x sched <= 1.5: median 1.20 of 1.50, 1.00, 1.20, met"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	dir := t.TempDir()
	paths, err := doc.writePlot(dir)
	if err != nil || len(paths) != 1 {
		t.Fatalf("writePlot: got %v, %v", paths, err)
	}
	if _, err := os.Stat(paths[0]); err != nil {
		t.Error(err)
	}
}

// TestStartServerFailures starts a shell that stands for the server and
// says each thing a server that cannot serve says.
func TestStartServerFailures(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	old := geteuid
	t.Cleanup(func() { geteuid = old })
	geteuid = func() int { return 1000 } // run the shell as it is
	l, err := newLauncher(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		script, want string
		noSchedIdle  bool
	}{
		{`echo '{"error":"threads cannot be made SCHED_IDLE here","no_sched_idle":true}'; exit 1`, "cannot be made SCHED_IDLE", true},
		{`echo '{"error":"listen: address in use"}'`, "it could not serve: listen: address in use", false},
		{`echo not json`, `its first line "not json"`, false},
		{`echo oops >&2; exit 3`, "it exited before its first line: exit status 3: oops", false},
	} {
		cfg := validConfig()
		cfg.Command = func(ctx context.Context, _ ...string) *exec.Cmd {
			return exec.CommandContext(ctx, "/bin/sh", "-c", tt.script)
		}
		p, err := startServer(context.Background(), cfg, l, floorServer)
		if p != nil || err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, hogproc.ErrNoSchedIdle) != tt.noSchedIdle {
			t.Errorf("%s: got %v, want an error containing %q (ErrNoSchedIdle: %v)", tt.script, err, tt.want, tt.noSchedIdle)
		}
	}
}
