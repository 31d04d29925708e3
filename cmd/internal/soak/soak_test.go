package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string
	}{
		{"default", func(*Config) {}, ""},
		{"no server", func(c *Config) { c.ServerCmd = nil }, "ServerCmd is required"},
		{"too short", func(c *Config) { c.Duration = 9 * time.Second }, "Duration (-d) must be in 10s..24h, got 9s"},
		{"too long", func(c *Config) { c.Duration = 25 * time.Hour }, "Duration (-d) must be in 10s..24h, got 25h0m0s"},
		{"shortest", func(c *Config) { c.Duration = 10 * time.Second }, ""},
		{"longest", func(c *Config) { c.Duration = 24 * time.Hour }, ""},
		{"rate", func(c *Config) { c.Rate = 0 }, "Rate must be in 1..10000 requests/s, got 0"},
		{"concurrency", func(c *Config) { c.Concurrency = 1001 }, "Concurrency must be in 1..1000, got 1001"},
		{"group rate", func(c *Config) { c.GroupRate = 0.5 }, "GroupRate must be in 1..10000 requests/s, got 0.5"},
		{"sample interval", func(c *Config) { c.SampleInterval = time.Millisecond }, "SampleInterval must be in 10ms..1m"},
		{"too few samples", func(c *Config) { c.SampleInterval = 2 * time.Second; c.Duration = 19 * time.Second }, "at least 10 samples"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig("cpusched", "serve")
			tt.change(&cfg)
			err := cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got error %q, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRunInvalidConfigStartsNothing(t *testing.T) {
	cfg := DefaultConfig("/nonexistent/cpusched", "serve")
	cfg.Duration = time.Second
	if rep, err := Run(context.Background(), cfg); rep != nil || err == nil {
		t.Errorf("got (%v, %v), want (nil, an error)", rep, err)
	}
}

func TestRunServerDoesNotStart(t *testing.T) {
	cfg := DefaultConfig("/nonexistent/cpusched", "serve")
	cfg.Duration = MinDuration
	rep, err := Run(context.Background(), cfg)
	if rep != nil || err == nil || !strings.Contains(err.Error(), "/nonexistent/cpusched") {
		t.Errorf("got (%v, %v), want (nil, an error naming the program)", rep, err)
	}
}

// TestRunEndToEnd soaks the demo server (this test binary, see TestMain)
// for 4 s: every case answered as expected, a sample every 100 ms, a clean
// shutdown. The rule's verdict is logged, not checked: 4 s under -race say
// little about leaks.
func TestRunEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the demo server; skipped with -short")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { minDuration = d }(minDuration)
	minDuration = time.Second
	cfg := DefaultConfig(exe, "serve")
	cfg.Duration, cfg.SampleInterval = 4*time.Second, 100*time.Millisecond
	cfg.Rate = 200
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())

	if rep.UnexpectedTotal != 0 {
		t.Errorf("got %d unexpected outcomes, want 0: %+v", rep.UnexpectedTotal, rep.Unexpected)
	}
	for _, c := range rep.Requests {
		if len(c.Counts) == 0 {
			t.Errorf("case %q: no request finished, want some", c.Case)
		}
	}
	// About 40 on a quiet machine; each sample fetches /metrics and reads
	// /proc, which under -race on a loaded 2-CPU machine has taken longer
	// than the interval, so only the floor that Validate asks of a run
	// (10) is a failure.
	if n := len(rep.Samples); n < 10 {
		t.Errorf("got %d samples, want about 40 (at least 10)", n)
	}
	for i, s := range rep.Samples {
		if s.RSSBytes == 0 || s.Threads == 0 || s.FDs == 0 || s.Goroutines <= 0 || s.MetricsBytes <= 0 {
			t.Errorf("sample %d: got %+v, want every quantity read", i, s)
			break
		}
	}
	var names []string
	for _, c := range rep.Checks {
		names = append(names, c.Name)
		if c.Name == "shutdown" && !c.Pass {
			t.Errorf("shutdown: %s", c.Detail)
		}
	}
	if want := "rss goroutines fds scrapes requests shutdown"; strings.Join(names, " ") != want {
		t.Errorf("got checks %v, want %s", names, want)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Samples) != len(rep.Samples) {
		t.Errorf("JSON round trip: got %d samples (err %v), want %d", len(back.Samples), err, len(rep.Samples))
	}
}

// TestRunCancelled: cancelling ctx stops the load and the server promptly
// and returns the samples so far with ctx's error. ctx is cancelled once
// the first sample is in (the progress line shows it), not at a fixed
// time: under -race on a loaded machine the server has taken longer than
// 1.5 s to start, and Run then rightly returned no report.
func TestRunCancelled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the demo server; skipped with -short")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(exe, "serve")
	cfg.Duration, cfg.SampleInterval = time.Minute, 100*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second) // short of Duration
	defer cancel()
	var cancelled time.Time
	var once sync.Once
	cfg.Progress = report.ForceProgress(writerFunc(func(line []byte) {
		if bytes.Contains(line, []byte(" rss ")) { // sampleUntilDone's line, after a sample
			once.Do(func() { cancelled = time.Now(); cancel() })
		}
	}))
	rep, err := Run(ctx, cfg)
	if err == nil || ctx.Err() == nil {
		t.Fatalf("got error %v, want ctx's", err)
	}
	if cancelled.IsZero() {
		t.Fatalf("no sample within 50 s: got error %v, report %+v", err, rep)
	}
	if rep == nil || rep.Pass || !rep.Config.InterruptedEarly || len(rep.Samples) == 0 {
		t.Errorf("got report %+v, want a failed, interrupted one with samples", rep)
	}
	if took := time.Since(cancelled); took > 10*time.Second {
		t.Errorf("Run took %v after ctx was cancelled, want it to return soon", took)
	}
}

// writerFunc is an io.Writer that hands each write to the function.
type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

func TestWriteTable(t *testing.T) {
	rep := &Report{
		Server: "isolation=none workers=2 gomaxprocs=2",
		Config: ReportConfig{DurationS: 60, Rate: 100, Concurrency: 16, GroupRate: 20, ElapsedS: 60},
		Samples: []Sample{
			{T: 1, RSSBytes: 20 << 20, Goroutines: 15, Threads: 10, FDs: 12, MetricsBytes: 32 << 10, Groups: 2, RequestsPerS: 120},
			{T: 2, RSSBytes: 21 << 20, Goroutines: -1, Threads: 10, FDs: 13, MetricsBytes: -1, Groups: -1, RequestsPerS: 100, ScrapeError: "timeout"},
		},
		Requests: []CaseCount{{Case: "bad n=0", Want: []string{"400"}, Counts: map[string]int64{"400": 3, "200": 1}}},
		Unexpected: []Unexpected{
			{Case: "bad n=0", Method: "GET", Target: "/checksum?n=0", Outcome: "200", Detail: "{\"passes\":1}\n", AtS: 1.5},
		},
		UnexpectedTotal: 1,
		Checks:          []Check{{Name: "rss", Pass: true, Detail: "fine"}, {Name: "requests", Pass: false, Detail: "1 unexpected"}},
		Rule:            RuleText,
	}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"    1    20.0          15       10   12       2           32    120\n",
		"    2    21.0           -       10   13       -            -    100\n",
		"bad n=0   400  200 x 1, 400 x 3\n",
		"    1.5 s  GET /checksum?n=0: 200  {\"passes\":1}\n",
		"rss        PASS  fine\n",
		"requests   FAIL  1 unexpected\n",
		"verdict: FAIL (requests)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q; got:\n%s", want, out)
		}
	}
}
