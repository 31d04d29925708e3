package switchcost

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/sysstat"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDefaultProcs(t *testing.T) {
	tests := []struct {
		cpus  int
		quick bool
		want  []int
	}{
		{1, false, []int{1, 2}},
		{2, false, []int{1, 2, 3, 4}},
		{4, false, []int{1, 2, 3, 4, 5, 6, 7, 8}},
		{16, false, []int{1, 2, 4, 8, 16, 32}},
		{12, false, []int{1, 2, 4, 8, 12, 16, 24}},
		{2, true, []int{1, 2}},
		{1, true, []int{1, 2}},
		{0, false, []int{1, 2}},
	}
	for _, tt := range tests {
		if got := DefaultProcs(tt.cpus, tt.quick); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("DefaultProcs(%d, %v): got %v, want %v", tt.cpus, tt.quick, got, tt.want)
		}
	}
}

func TestFitDuration(t *testing.T) {
	tests := []struct {
		d      time.Duration
		cells  int
		budget time.Duration
		want   time.Duration
	}{
		{1500 * time.Millisecond, 28, Budget, 1500 * time.Millisecond},
		{1500 * time.Millisecond, 100, Budget, 850 * time.Millisecond},
		{1500 * time.Millisecond, 10000, Budget, MinDuration},
		{400 * time.Millisecond, 14, QuickBudget, 400 * time.Millisecond},
		{time.Second, 0, Budget, time.Second},
	}
	for _, tt := range tests {
		if got := FitDuration(tt.d, tt.cells, tt.budget); got != tt.want {
			t.Errorf("FitDuration(%v, %d, %v): got %v, want %v", tt.d, tt.cells, tt.budget, got, tt.want)
		}
	}
}

func validConfig() Config {
	return Config{Workloads: Workloads(), Procs: []int{1, 2}, Clients: 100, Buffers: []int{0, 1000}, Duration: DefaultDuration}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   string // substring of the error; "" for none
	}{
		{"valid", func(*Config) {}, ""},
		{"no workloads", func(c *Config) { c.Workloads = nil }, "-workloads: empty list"},
		{"unknown workload", func(c *Config) { c.Workloads = []string{"spin"} }, `-workloads: unknown workload "spin" (valid: busy,gosched,chan,cpusched)`},
		{"no procs", func(c *Config) { c.Procs = nil }, "-procs: empty list"},
		{"zero procs", func(c *Config) { c.Procs = []int{0} }, "-procs: 0 out of range (valid: 1..1024)"},
		{"zero clients", func(c *Config) { c.Clients = 0 }, "-clients: 0 out of range"},
		{"no buffers", func(c *Config) { c.Buffers = nil }, "-buffer: empty list"},
		{"negative buffer", func(c *Config) { c.Buffers = []int{-1} }, "-buffer: -1 is negative"},
		{"short duration", func(c *Config) { c.Duration = time.Millisecond }, "-duration: 1ms out of range"},
	}
	for _, tt := range tests {
		c := validConfig()
		tt.change(&c)
		err := c.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: got error %v, want none", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestParseInts(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr string
	}{
		{"1,2, 4", []int{1, 2, 4}, ""},
		{"0", []int{0}, ""},
		{"", nil, "-procs: empty list"},
		{" , ", nil, "-procs: empty list"},
		{"1,x", nil, `-procs: "x" is not an integer`},
	}
	for _, tt := range tests {
		got, err := ParseInts("-procs", tt.in)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("ParseInts(%q): got error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseInts(%q): got %v, %v, want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestCellsRunBusyOncePerProcs(t *testing.T) {
	c := validConfig()
	cells := c.Cells()
	// busy: 2 procs x 1; the other three: 2 procs x 2 buffers.
	if got, want := len(cells), 2+3*2*2; got != want {
		t.Fatalf("len(Cells()): got %d, want %d", got, want)
	}
	for _, s := range cells {
		if (s.Workload == Busy) != (s.Buffer == -1) {
			t.Errorf("cell %+v: got buffer %d, want -1 exactly for busy", s, s.Buffer)
		}
		if s.Clients != 100 {
			t.Errorf("cell %+v: got clients %d, want 100", s, s.Clients)
		}
	}
}

func TestRunWorkloadCounts(t *testing.T) {
	tests := []struct {
		workload string
		buffer   int
	}{
		{Busy, 0}, {Gosched, 0}, {Gosched, 1000}, {Chan, 0}, {Chan, 1000}, {CPUSched, 0}, {CPUSched, 1000},
	}
	for _, tt := range tests {
		ops, err := RunWorkload(context.Background(), tt.workload, 2, 4, tt.buffer, 20*time.Millisecond)
		if err != nil || ops == 0 {
			t.Errorf("RunWorkload(%s, buffer %d): got %d ops, %v, want > 0 ops and no error", tt.workload, tt.buffer, ops, err)
		}
	}
	if _, err := RunWorkload(context.Background(), "spin", 1, 1, 0, time.Millisecond); err == nil {
		t.Errorf("RunWorkload(spin): got no error, want unknown workload")
	}
	if _, err := RunWorkload(context.Background(), Busy, 1, 0, 0, time.Millisecond); err == nil {
		t.Errorf("RunWorkload(clients 0): got no error, want one")
	}
}

func TestRunWorkloadStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if _, err := RunWorkload(ctx, CPUSched, 1, 10, 0, time.Minute); err != nil {
		t.Fatalf("RunWorkload: got %v, want nil", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("RunWorkload with a cancelled ctx: got %v, want it to return without waiting a minute", d)
	}
}

func TestCellFrom(t *testing.T) {
	u := sysstat.Usage{Usr: 60, Sys: 30, Idle: 10, Seconds: 2, CtxSwitchesPerSec: 500}
	ru0 := rusage{cpu: time.Second, vol: 10, invol: 4, ok: true}
	ru1 := rusage{cpu: 4 * time.Second, vol: 30, invol: 8, ok: true}
	c := cellFrom(Spec{Workload: Chan, Procs: 2, Clients: 100, Buffer: 0}, 1000, u, ru0, ru1)
	want := Cell{Spec: Spec{Workload: Chan, Procs: 2, Clients: 100, Buffer: 0}, Seconds: 2, Ops: 1000, OpsPerSec: 500,
		Usr: 60, Sys: 30, Idle: 10, CtxPerSec: 500, VolPerSec: 10, InvolPerSec: 2, ProcCPUPercent: 150, OpsPerCPUSec: 1000.0 / 3}
	if c != want {
		t.Errorf("cellFrom: got %+v, want %+v", c, want)
	}
	if c := cellFrom(Spec{}, 5, sysstat.Usage{}, ru0, ru1); c.OpsPerSec != 0 || c.ProcCPUPercent != 0 {
		t.Errorf("cellFrom with no time: got %+v, want zero rates", c)
	}
}

func TestWriteTable(t *testing.T) {
	res := &Result{CPUs: 2, GoVersion: "go1.x", Duration: time.Second, Cells: []Cell{
		{Spec: Spec{Workload: Busy, Procs: 1, Buffer: -1}, Usr: 99, OpsPerSec: 1e6},
		{Spec: Spec{Workload: Chan, Procs: 2, Buffer: 0}, Skipped: "test"},
	}}
	var b bytes.Buffer
	if err := WriteTable(&b, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"busy", "1,000,000", "skipped: test", "~700k cs/s", "why it differs"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("WriteTable: got\n%s\nwant it to contain %q", b.String(), want)
		}
	}
	s := series(res, func(c Cell) float64 { return c.OpsPerSec })
	if len(s) != 1 || s[0].Name != Busy || !reflect.DeepEqual(s[0].X, []float64{1}) {
		t.Errorf("series: got %+v, want one busy series at procs 1", s)
	}
}
