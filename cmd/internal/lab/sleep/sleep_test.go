package sleep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestComputeStats(t *testing.T) {
	tests := []struct {
		name    string
		samples []float64
		want    Stats
	}{
		{"empty", nil, Stats{}},
		{"one", []float64{5}, Stats{5, 5, 5, 0}},
		{"two", []float64{1, 3}, Stats{1, 2, 3, 1}},
		{"four", []float64{2, 4, 4, 6}, Stats{2, 4, 6, math.Sqrt(2)}},
	}
	for _, tt := range tests {
		got := ComputeStats(tt.samples)
		if math.Abs(got.Stddev-tt.want.Stddev) > 1e-9 || got.Min != tt.want.Min || got.Avg != tt.want.Avg || got.Max != tt.want.Max {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestWorkCountsBytes(t *testing.T) {
	buf := []byte{1, 2}
	// Two units over {1, 2}: h = ((1*31+2)*31+1)*31+2.
	if got, want := work(buf, 2), uint64(((1*31+2)*31+1)*31+2); got != want {
		t.Errorf("work(2 units): got %d, want %d", got, want)
	}
	if got := work(buf, 0); got != 0 {
		t.Errorf("work(0 units): got %d, want 0", got)
	}
}

func TestDefaultThreads(t *testing.T) {
	tests := []struct {
		cpus int
		want string
	}{{0, "[1 2 4]"}, {1, "[1 2 4]"}, {2, "[1 2 4 8]"}, {3, "[1 2 4 8]"}, {4, "[1 2 4 8 16]"}}
	for _, tt := range tests {
		if got := fmtInts(DefaultThreads(tt.cpus)); got != tt.want {
			t.Errorf("DefaultThreads(%d): got %s, want %s", tt.cpus, got, tt.want)
		}
	}
}

func fmtInts(v []int) string { return fmt.Sprint(v) }

func validConfig() Config {
	return Config{Methods: []string{"none"}, Modes: []string{"goroutine"}, Threads: []int{1},
		Sleep: time.Millisecond, Outer: 1, Inner: 1, WorkKiB: 1}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*Config)
		wantErr string
	}{
		{"valid", func(*Config) {}, ""},
		{"unknown method", func(c *Config) { c.Methods = []string{"usleep"} }, `-methods: unknown method "usleep" (valid: none, sleep, timer`},
		{"empty methods", func(c *Config) { c.Methods = nil }, "-methods must not be empty"},
		{"unknown mode", func(c *Config) { c.Modes = []string{"thread"} }, `-modes: unknown mode "thread" (valid: goroutine, locked)`},
		{"empty modes", func(c *Config) { c.Modes = nil }, "-modes must not be empty"},
		{"empty threads", func(c *Config) { c.Threads = nil }, "-threads must not be empty"},
		{"zero threads", func(c *Config) { c.Threads = []int{0} }, "-threads: each count must be in 1..1024, got 0"},
		{"negative sleep", func(c *Config) { c.Sleep = -1 }, "-sleep must be >= 0"},
		{"zero outer", func(c *Config) { c.Outer = 0 }, "-outer must be >= 1, got 0"},
		{"negative inner", func(c *Config) { c.Inner = -1 }, "-inner must be >= 0, got -1"},
		{"zero work", func(c *Config) { c.WorkKiB = 0 }, "-work must be in 1..1048576 KiB, got 0"},
	}
	for _, tt := range tests {
		c := validConfig()
		tt.mod(&c)
		err := c.Validate()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: got error %v, want none", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: got error %v, want one containing %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestCellsAndArgs(t *testing.T) {
	c := validConfig()
	c.Methods = []string{"none", "busy"}
	c.Modes = Modes
	c.Threads = []int{1, 2, 4}
	cells := c.Cells()
	if got, want := len(cells), 2*2*3; got != want {
		t.Fatalf("len(Cells): got %d, want %d", got, want)
	}
	if got, want := strings.Join(cells[len(cells)-1].Args(), " "), "-method busy -mode locked -threads 4 -sleep 1ms -outer 1 -inner 1 -work 1"; got != want {
		t.Errorf("last cell's Args: got %q, want %q", got, want)
	}
	if e1, e2 := c.Estimate(time.Millisecond, 2, 0), c.Estimate(time.Millisecond, 1, 0); e1 <= 0 || e2 < e1 {
		t.Errorf("Estimate: got %v on 2 CPUs and %v on 1, want positive and not less on 1 CPU", e1, e2)
	}
}

// TestRunCellCounts runs every method briefly and checks the counting, not
// the timing.
func TestRunCellCounts(t *testing.T) {
	for _, mode := range Modes {
		for _, m := range Methods {
			c := CellConfig{Method: m, Mode: mode, Threads: 3, Sleep: 50 * time.Microsecond, Outer: 4, Inner: 1, WorkKiB: 1}
			r, err := RunCell(context.Background(), c)
			if err != nil {
				t.Fatalf("%s/%s: %v", mode, m, err)
			}
			if r.Skipped != "" {
				continue
			}
			if got, want := r.Iterations, 12; got != want {
				t.Errorf("%s/%s iterations: got %d, want %d", mode, m, got, want)
			}
			if !(r.MinUs > 0 && r.MinUs <= r.AvgUs && r.AvgUs <= r.MaxUs) {
				t.Errorf("%s/%s: got min %v avg %v max %v, want 0 < min <= avg <= max", mode, m, r.MinUs, r.AvgUs, r.MaxUs)
			}
		}
	}
}

func TestRunCellSkipped(t *testing.T) {
	old := checkSupported
	t.Cleanup(func() { checkSupported = old })
	checkSupported = func(string) error { return errNotLinux }
	r, err := RunCell(context.Background(), CellConfig{Method: "nanosleep", Mode: "locked", Threads: 1, Outer: 1, Inner: 1, WorkKiB: 1})
	if err != nil || r.Skipped != "skipped: not Linux" {
		t.Errorf("got (%+v, %v), want Skipped %q and no error", r, err, "skipped: not Linux")
	}
}

func TestRunCellCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := RunCell(ctx, CellConfig{Method: "sleep", Mode: "goroutine", Threads: 2, Sleep: time.Millisecond, Outer: 1000, Inner: 1, WorkKiB: 1})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

func TestRunNeedsCommand(t *testing.T) {
	if _, err := Run(context.Background(), validConfig()); err == nil || !strings.Contains(err.Error(), "Command is nil") {
		t.Errorf("got %v, want an error about Command", err)
	}
}

func TestWriteTableSkipped(t *testing.T) {
	var out bytes.Buffer
	writeTable(&out, []CellResult{{Method: "yield", Mode: "locked", Threads: 1, Skipped: "skipped: not Linux"}})
	if !strings.Contains(out.String(), "skipped: not Linux") {
		t.Errorf("got table %q, want the skip reason in the row", out.String())
	}
}
