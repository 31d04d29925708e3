package fleet

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigIsValid(t *testing.T) {
	if err := DefaultConfig("cpusched").Validate(); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig("cpusched")
	cfg.Duration, cfg.Warmup, cfg.Rounds = QuickDuration, QuickWarmup, QuickRounds
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the -quick config: %v", err)
	}
}

// TestValidate: each bad field gets an error naming its flag and, for a
// number, the valid range.
func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no program", func(c *Config) { c.Program = "" }, "Program"},
		{"one replica", func(c *Config) { c.Replicas = 1 }, "-replicas) must be in 2..8, got 1"},
		{"many replicas", func(c *Config) { c.Replicas = MaxReplicas + 1 }, "-replicas) must be in 2..8"},
		{"no scenario", func(c *Config) { c.Scenarios = nil }, "-scenarios): no scenario given (valid: quota, batch, neighbor)"},
		{"unknown scenario", func(c *Config) { c.Scenarios = []string{"batch", "burst"} }, `-scenarios): unknown scenario "burst"`},
		{"scenario twice", func(c *Config) { c.Scenarios = []string{"batch", "batch"} }, `-scenarios): scenario "batch" given twice`},
		{"unknown policy", func(c *Config) { c.Policies = []string{"pick_first"} }, `-policies): unknown policy "pick_first" (valid: round_robin, weighted_round_robin, weighted_round_robin_cpu)`},
		{"policy twice", func(c *Config) { c.Policies = []string{PolicyWRR, PolicyWRR} }, "given twice"},
		{"negative quota rate", func(c *Config) { c.QuotaRate = -1 }, "-quota-rate) must be 0 (scaled to this machine) or in 1..5000 calls/s, got -1"},
		{"NaN batch rate", func(c *Config) { c.BatchRate = math.NaN() }, "-batch-rate) must be 0 (scaled to this machine) or in 1..5000 calls/s, got NaN"},
		{"huge batch rate", func(c *Config) { c.BatchRate = 1e9 }, "-batch-rate) must be 0 (scaled to this machine) or in 1..5000"},
		{"negative neighbor rate", func(c *Config) { c.NeighborRate = -3 }, "-neighbor-rate) must be 0 (scaled to this machine) or in 1..5000 calls/s, got -3"},
		{"no call in a neighbor segment", func(c *Config) { c.NeighborRate, c.Duration, c.Rounds = 1, 600*time.Millisecond, 1 }, "neighbor scenario's rate 1 calls/s"},
		{"weak cpu too small", func(c *Config) { c.WeakCPU = 0.01 }, "-weak-cpu) must be in 0.1.."},
		{"cpu +Inf", func(c *Config) { c.CPU = math.Inf(1) }, "-cpu) must be in 0.1.."},
		{"short duration", func(c *Config) { c.Duration = time.Millisecond }, "-duration) must be in 500ms..10m0s, got 1ms"},
		{"long warmup", func(c *Config) { c.Warmup = time.Hour }, "-warmup) must be in 0..1m0s, got 1h0m0s"},
		{"negative warmup", func(c *Config) { c.Warmup = -time.Second }, "-warmup) must be in 0..1m0s"},
		{"no timeout", func(c *Config) { c.Timeout = 0 }, "-timeout) must be in 10ms..1m0s, got 0s"},
		{"no call in the window", func(c *Config) { c.BatchRate, c.Duration, c.Rounds = 1, 600*time.Millisecond, 1 }, "batch scenario's rate 1 calls/s over a segment of 600ms (Duration (-duration) over Rounds (-rounds)) makes no call"},
		{"no call in a segment", func(c *Config) { c.BatchRate, c.Duration, c.Rounds = 1, 1500*time.Millisecond, 2 }, "batch scenario's rate 1 calls/s over a segment of 750ms"},
		{"no rounds", func(c *Config) { c.Rounds = 0 }, "-rounds) must be in 1..20, got 0"},
		{"many rounds", func(c *Config) { c.Rounds = MaxRounds + 1 }, "-rounds) must be in 1..20, got 21"},
		{"short segments", func(c *Config) { c.Duration, c.Rounds = 2*time.Second, 5 }, "Duration (-duration) 2s over Rounds (-rounds) 5 is a segment of 400ms: each must be at least 500ms"},
		{"unknown arrivals", func(c *Config) { c.Arrivals = "bursty" }, `Arrivals (-arrivals) must be one of fixed, poisson, got "bursty"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig("cpusched")
			tt.change(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "fleet: ") {
				t.Fatalf("Validate: %v, want an error starting \"fleet: \" with %q", err, tt.want)
			}
		})
	}
}

// TestReplicaSpecs: the first replica is the odd one; the CPU-fed policy
// turns application_utilization off on every replica.
func TestReplicaSpecs(t *testing.T) {
	cfg := DefaultConfig("cpusched")
	q := cfg.replicas(ScenarioQuota, PolicyWRR)
	if len(q) != DefaultReplicas || q[0].cpuLimit != DefaultWeakCPU || q[1].cpuLimit != DefaultCPU || q[0].batch || q[0].gomaxprocs != 0 {
		t.Errorf("quota: %+v", q)
	}
	b := cfg.replicas(ScenarioBatch, PolicyWRRCPU)
	if !b[0].batch || b[1].batch || b[0].cpuLimit != 0 || b[1].gomaxprocs != batchGOMAXPROCS {
		t.Errorf("batch: %+v", b)
	}
	for _, s := range b {
		if s.reports != ReportCPU {
			t.Errorf("batch under %s: reports %q, want %q", PolicyWRRCPU, s.reports, ReportCPU)
		}
	}
	n := cfg.replicas(ScenarioNeighbor, PolicyWRR)
	if !n[0].neighbor || n[1].neighbor || n[0].batch || n[0].cpuLimit != DefaultCPU || n[1].cpuLimit != DefaultCPU || n[0].gomaxprocs != 0 {
		t.Errorf("neighbor: %+v", n)
	}
	if r := cfg.replicas(ScenarioBatch, PolicyRoundRobin); r[0].reports != ReportCpusched {
		t.Errorf("batch under %s: reports %q, want %q", PolicyRoundRobin, r[0].reports, ReportCpusched)
	}
}

// TestServiceConfig: each policy's service config is one grpc-go accepts,
// with the shortened periods for the weighted ones.
func TestServiceConfig(t *testing.T) {
	for _, p := range Policies() {
		sc := serviceConfig(p)
		wantName := p
		if p == PolicyWRRCPU {
			wantName = PolicyWRR
		}
		if !strings.Contains(sc, `"`+wantName+`"`) {
			t.Errorf("%s: %s does not name %s", p, sc, wantName)
		}
		conn, err := dial([]string{"127.0.0.1:1"}, p) // never used: the dial is lazy
		if err != nil {
			t.Fatalf("%s: %s: %v", p, sc, err)
		}
		conn.Close()
	}
}

func TestCheckLoopback(t *testing.T) {
	for _, a := range []string{"127.0.0.1:80", "[::1]:80", "127.0.0.2:1"} {
		if err := checkLoopback(a); err != nil {
			t.Errorf("checkLoopback(%q): %v", a, err)
		}
	}
	for _, a := range []string{"10.0.0.1:80", "example.com:80", "localhost:80", "127.0.0.1", ""} {
		if err := checkLoopback(a); err == nil {
			t.Errorf("checkLoopback(%q): no error", a)
		}
	}
	if _, err := dial([]string{"127.0.0.1:1", "192.0.2.1:80"}, PolicyRoundRobin); err == nil {
		t.Error("dial with a non-loopback address: no error")
	}
}

// TestScaledRates: a rate left at 0 is the default scaled by
// ReferenceHeavy over the heavy call measured here, within the valid
// range; a rate given is kept, and then nothing is measured.
func TestScaledRates(t *testing.T) {
	cfg := DefaultConfig("cpusched")
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the defaults (rates scaled): %v", err)
	}
	measured := 0
	at := func(d time.Duration) func() time.Duration {
		return func() time.Duration { measured++; return d }
	}
	got, heavy := cfg.withRates(at(ReferenceHeavy / 2))
	if got.QuotaRate != 2*DefaultQuotaRate || got.BatchRate != 2*DefaultBatchRate || heavy != ReferenceHeavy/2 {
		t.Errorf("at half the reference: rates %v, %v (heavy %v), want %v, %v", got.QuotaRate, got.BatchRate, heavy, 2*DefaultQuotaRate, 2*DefaultBatchRate)
	}
	if got, _ := cfg.withRates(at(time.Microsecond)); got.QuotaRate != MaxRate || got.BatchRate != MaxRate {
		t.Errorf("at 1us: rates %v, %v, want the most, %v", got.QuotaRate, got.BatchRate, MaxRate)
	}
	if got, _ := cfg.withRates(at(10 * time.Second)); got.QuotaRate != MinRate || got.BatchRate != MinRate {
		t.Errorf("at 10s: rates %v, %v, want the least, %v", got.QuotaRate, got.BatchRate, MinRate)
	}
	cfg.BatchRate = 123
	if got, _ := cfg.withRates(at(ReferenceHeavy)); got.QuotaRate != DefaultQuotaRate || got.BatchRate != 123 {
		t.Errorf("one rate given: rates %v, %v, want %v, 123", got.QuotaRate, got.BatchRate, DefaultQuotaRate)
	}
	if got, _ := cfg.withRates(at(ReferenceHeavy / 2)); got.NeighborRate != 2*DefaultNeighborRate {
		t.Errorf("at half the reference: neighbor rate %v, want %v", got.NeighborRate, 2*DefaultNeighborRate)
	}
	measured = 0
	cfg.QuotaRate, cfg.NeighborRate = 321, 45
	if got, heavy := cfg.withRates(at(ReferenceHeavy)); got.QuotaRate != 321 || got.BatchRate != 123 || got.NeighborRate != 45 || heavy != 0 || measured != 0 {
		t.Errorf("all given: rates %v, %v, %v, heavy %v, measured %d times; want them kept and no measurement", got.QuotaRate, got.BatchRate, got.NeighborRate, heavy, measured)
	}
	if d := MeasureHeavy(); d <= 0 || d > time.Second {
		t.Errorf("MeasureHeavy = %v, want a few ms", d)
	}
}
