package sysstat

import (
	"errors"
	"io/fs"
	"math"
	"runtime"
	"testing"
	"time"
)

// fixtureReader reads testdata/proc and stamps every sample with at.
func fixtureReader(t *testing.T, at time.Time) *Reader {
	t.Helper()
	r, err := NewReader("testdata/proc")
	if err != nil {
		t.Fatalf("NewReader(testdata/proc): %v", err)
	}
	r.now = func() time.Time { return at }
	return r
}

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func TestSampleFixture(t *testing.T) {
	got, err := fixtureReader(t, t0).Sample()
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	// testdata/proc/stat's cpu line in USER_HZ ticks, divided by 100.
	want := System{
		When: t0,
		CPU: CPUTimes{
			User: 4800, Nice: 12.05, System: 1610, Idle: 36420,
			IOWait: 60, IRQ: 0, SoftIRQ: 62.4, Steal: 1.6,
		},
		CPUs:            4,
		ContextSwitches: 98765432,
	}
	if got != want {
		t.Errorf("Sample:\ngot  %+v\nwant %+v", got, want)
	}
}

func TestProcessFixture(t *testing.T) {
	got, err := fixtureReader(t, t0).Process(1234)
	if err != nil {
		t.Fatalf("Process(1234): %v", err)
	}
	want := Process{
		When:                   t0,
		UserCPU:                15230 * time.Millisecond, // utime 1523 ticks
		SystemCPU:              2470 * time.Millisecond,  // stime 247 ticks
		VoluntaryCtxSwitches:   4821,
		InvoluntaryCtxSwitches: 377,
		RSSBytes:               20480 * 1024, // VmRSS kB
		PeakRSSBytes:           52480 * 1024, // VmHWM kB
		Threads:                7,
	}
	if got != want {
		t.Errorf("Process(1234):\ngot  %+v\nwant %+v", got, want)
	}
}

func TestReaderErrors(t *testing.T) {
	if _, err := NewReader("testdata/no-such-dir"); err == nil {
		t.Errorf("NewReader(testdata/no-such-dir): got nil error, want one")
	}
	r := fixtureReader(t, t0)
	_, err := r.Process(999999)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Process(999999): got error %v, want one wrapping fs.ErrNotExist", err)
	}
	empty, err := NewReader(t.TempDir())
	if err != nil {
		t.Fatalf("NewReader(empty dir): %v", err)
	}
	if _, err := empty.Sample(); err == nil {
		t.Errorf("Sample on a root without stat: got nil error, want one")
	}
}

func TestSystemSince(t *testing.T) {
	base := System{
		When:            t0,
		CPU:             CPUTimes{User: 100, Nice: 10, System: 50, Idle: 1000, IOWait: 5, IRQ: 1, SoftIRQ: 2, Steal: 0},
		CPUs:            2,
		ContextSwitches: 1000,
	}
	at := func(d time.Duration, ctxt uint64, c CPUTimes) System {
		return System{When: t0.Add(d), CPU: c, CPUs: 2, ContextSwitches: ctxt}
	}
	tests := []struct {
		name  string
		later System
		want  Usage
	}{
		{
			// 2 s on 2 CPUs = 4 CPU-seconds: 1.5 user + 0.5 nice, 0.6 sys + 0.2 irq + 0.2 softirq,
			// 0.8 idle, 0.2 iowait.
			name: "mixed",
			later: at(2*time.Second, 3000, CPUTimes{
				User: 101.5, Nice: 10.5, System: 50.6, Idle: 1000.8, IOWait: 5.2, IRQ: 1.2, SoftIRQ: 2.2,
			}),
			want: Usage{Usr: 50, Sys: 25, Idle: 20, IOWait: 5, Busy: 75, CtxSwitchesPerSec: 1000, Seconds: 2},
		},
		{
			name:  "all idle",
			later: at(time.Second, 1000, CPUTimes{User: 100, Nice: 10, System: 50, Idle: 1002, IOWait: 5, IRQ: 1, SoftIRQ: 2}),
			want:  Usage{Idle: 100, Seconds: 1},
		},
		{
			name:  "steal counts as busy",
			later: at(time.Second, 1000, CPUTimes{User: 101, Nice: 10, System: 50, Idle: 1000, IOWait: 5, IRQ: 1, SoftIRQ: 2, Steal: 1}),
			want:  Usage{Usr: 50, Busy: 100, Seconds: 1},
		},
		{
			name:  "same sample twice",
			later: base,
			want:  Usage{},
		},
		{
			name:  "zero CPU delta, time passed",
			later: at(time.Second, 1500, base.CPU),
			want:  Usage{CtxSwitchesPerSec: 500, Seconds: 1},
		},
		{
			// iowait going backwards is clamped, not subtracted from the total.
			name:  "iowait went backwards",
			later: at(time.Second, 1000, CPUTimes{User: 101, Nice: 10, System: 50, Idle: 1001, IOWait: 4, IRQ: 1, SoftIRQ: 2}),
			want:  Usage{Usr: 50, Idle: 50, Busy: 50, Seconds: 1},
		},
		{
			name:  "samples swapped",
			later: at(-time.Second, 500, CPUTimes{User: 90, Nice: 10, System: 40, Idle: 900, IOWait: 5, IRQ: 1, SoftIRQ: 2}),
			want:  Usage{},
		},
		{
			name:  "ctxt went backwards",
			later: at(time.Second, 10, CPUTimes{User: 101, Nice: 10, System: 50, Idle: 1001, IOWait: 5, IRQ: 1, SoftIRQ: 2}),
			want:  Usage{Usr: 50, Idle: 50, Busy: 50, Seconds: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.later.Since(base)
			if !usageNear(got, tt.want) {
				t.Errorf("Since:\ngot  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// usageNear compares field by field within 1e-9, and fails on any NaN.
func usageNear(a, b Usage) bool {
	as := []float64{a.Usr, a.Sys, a.Idle, a.IOWait, a.Busy, a.CtxSwitchesPerSec, a.Seconds}
	bs := []float64{b.Usr, b.Sys, b.Idle, b.IOWait, b.Busy, b.CtxSwitchesPerSec, b.Seconds}
	for i := range as {
		if math.IsNaN(as[i]) || math.Abs(as[i]-bs[i]) > 1e-9 {
			return false
		}
	}
	return true
}

func TestProcessSince(t *testing.T) {
	base := Process{
		When: t0, UserCPU: time.Second, SystemCPU: 200 * time.Millisecond,
		VoluntaryCtxSwitches: 100, InvoluntaryCtxSwitches: 10, RSSBytes: 1 << 20, PeakRSSBytes: 2 << 20, Threads: 5,
	}
	tests := []struct {
		name    string
		later   Process
		want    ProcessUsage
		wantPct float64
	}{
		{
			name: "half a second",
			later: Process{
				When: t0.Add(500 * time.Millisecond), UserCPU: 1400 * time.Millisecond, SystemCPU: 300 * time.Millisecond,
				VoluntaryCtxSwitches: 150, InvoluntaryCtxSwitches: 12,
			},
			want: ProcessUsage{
				UserCPU: 400 * time.Millisecond, SystemCPU: 100 * time.Millisecond,
				VoluntaryPerSec: 100, InvoluntaryPerSec: 4, Seconds: 0.5,
			},
			wantPct: 100,
		},
		{
			name:    "same sample twice",
			later:   base,
			want:    ProcessUsage{},
			wantPct: 0,
		},
		{
			name:    "no time passed but CPU did",
			later:   Process{When: t0, UserCPU: 2 * time.Second, SystemCPU: 200 * time.Millisecond, VoluntaryCtxSwitches: 200, InvoluntaryCtxSwitches: 10},
			want:    ProcessUsage{UserCPU: time.Second},
			wantPct: 0,
		},
		{
			name:    "samples swapped",
			later:   Process{When: t0.Add(-time.Second), UserCPU: 500 * time.Millisecond, VoluntaryCtxSwitches: 50, InvoluntaryCtxSwitches: 5},
			want:    ProcessUsage{},
			wantPct: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.later.Since(base)
			if got != tt.want {
				t.Errorf("Since:\ngot  %+v\nwant %+v", got, tt.want)
			}
			if pct := got.CPUPercent(); math.Abs(pct-tt.wantPct) > 1e-9 {
				t.Errorf("CPUPercent: got %v, want %v", pct, tt.wantPct)
			}
		})
	}
}

func TestRealProc(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("no /proc on %s", runtime.GOOS)
	}
	r, err := NewReader("")
	if err != nil {
		t.Fatalf("NewReader(\"\"): %v", err)
	}
	sys1, err := r.Sample()
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	self1, err := r.Self()
	if err != nil {
		t.Fatalf("Self: %v", err)
	}
	// Use some CPU and memory so the counters have a reason to move.
	buf := make([]byte, 8<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	sys2, err := r.Sample()
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	self2, err := r.Self()
	if err != nil {
		t.Fatalf("Self: %v", err)
	}
	runtime.KeepAlive(buf)

	if sys2.CPUs < 1 {
		t.Errorf("CPUs: got %d, want >= 1", sys2.CPUs)
	}
	if sys2.ContextSwitches == 0 {
		t.Errorf("ContextSwitches: got 0, want > 0")
	}
	u := sys2.Since(sys1)
	for name, v := range map[string]float64{"Usr": u.Usr, "Sys": u.Sys, "Idle": u.Idle, "IOWait": u.IOWait, "Busy": u.Busy} {
		if math.IsNaN(v) || v < 0 || v > 100+1e-9 {
			t.Errorf("Usage.%s: got %v, want within [0, 100]", name, v)
		}
	}
	if u.Seconds <= 0 {
		t.Errorf("Usage.Seconds: got %v, want > 0", u.Seconds)
	}
	if self2.Threads < 1 {
		t.Errorf("Threads: got %d, want >= 1", self2.Threads)
	}
	if self2.RSSBytes < 8<<20 {
		t.Errorf("RSSBytes: got %d, want >= %d (the buffer just written)", self2.RSSBytes, 8<<20)
	}
	if self2.PeakRSSBytes < self2.RSSBytes {
		t.Errorf("PeakRSSBytes: got %d, want >= RSSBytes %d", self2.PeakRSSBytes, self2.RSSBytes)
	}
	pu := self2.Since(self1)
	if pu.UserCPU < 0 || pu.SystemCPU < 0 || pu.Seconds <= 0 {
		t.Errorf("Process Since: got %+v, want non-negative CPU and positive Seconds", pu)
	}
	t.Logf("machine %+v; self %+v, %.0f%% CPU", u, pu, pu.CPUPercent())
}
