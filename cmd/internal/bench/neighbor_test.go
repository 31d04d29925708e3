package bench

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/childproc"
	"github.com/cpusched/cpusched/cmd/internal/demo"
	"github.com/cpusched/cpusched/cmd/internal/hogproc"
	"github.com/cpusched/cpusched/cmd/internal/load"
)

// neighborChildEnv makes the test binary the neighbour (hogproc's
// NeighborMain) for the tests here.
const neighborChildEnv = "BENCH_TEST_NEIGHBOR_CHILD"

// runNeighborChild is the neighbour child's whole life; TestMain calls it.
func runNeighborChild() {
	err := hogproc.NeighborMain(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// startTestNeighbor starts the test binary as a one-thread neighbour,
// paused, and stops it at the end of the test.
func startTestNeighbor(t *testing.T) *hogproc.Process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-c", "1")
	cmd.Env = append(os.Environ(), neighborChildEnv+"=1")
	childproc.DieWithParent(cmd)
	p, err := hogproc.Start(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("the neighbour's Stop: %v", err)
		}
	})
	return p
}

// TestNeighborRunsOnlyInItsSteps: the neighbour, started paused, runs over
// a neighbour step's warm-up and window, whose row has its passes, and is
// paused after it and through the other steps.
func TestNeighborRunsOnlyInItsSteps(t *testing.T) {
	srv, err := demo.NewServer(demo.Config{Workers: 1, Garbage: demo.DefaultGarbage})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer func() {
		hs.Close()
		if err := srv.Close(context.Background()); err != nil {
			t.Errorf("the demo server's Close: %v", err)
		}
	}()
	nb := startTestNeighbor(t)
	cfg := DefaultConfig("cpusched", "serve")
	cfg.Step, cfg.Warmup, cfg.Settle, cfg.ProbeRate, cfg.NeighborConcurrency = 300*time.Millisecond, 50*time.Millisecond, 0, 100, 1
	m := newMeter(cfg, hs.URL, nil, os.Getpid())
	m.spec, m.neighbor = "none", nb
	defer m.close()
	ctx := context.Background()

	paused := func(when string) {
		t.Helper()
		time.Sleep(50 * time.Millisecond) // a pause ends each thread's pass in progress first
		c1, err := nb.Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		c2, err := nb.Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c1.Running || c2.Running || c2.Passes != c1.Passes {
			t.Errorf("%s: got the neighbour running=%v with %d then %d passes, want it paused", when, c2.Running, c1.Passes, c2.Passes)
		}
	}
	paused("before any step")
	for _, tt := range []struct {
		step         string
		wantNeighbor bool
	}{
		{StepIdle, false},
		{StepNeighborAlone, true},
		{StepIdle, false},
	} {
		before, err := nb.Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		row, err := m.step(ctx, "none", tt.step, func(string) {})
		if err != nil {
			t.Fatalf("%s: %v", tt.step, err)
		}
		after, err := nb.Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := after.Passes > before.Passes+1; got != tt.wantNeighbor {
			t.Errorf("%s: the neighbour made %d passes, want some: %v", tt.step, after.Passes-before.Passes, tt.wantNeighbor)
		}
		if n := row.Neighbor; (n != nil) != tt.wantNeighbor || n != nil && (!(n.PassesPerS > 0) || n.Threads != 1) {
			t.Errorf("%s: got neighbor %+v, want its passes only beside it", tt.step, n)
		}
		if row.Probe == nil || row.Probe.RPS <= 0 || row.GC == nil || row.Hog != nil {
			t.Errorf("%s: got probe %+v, gc %+v, hog %+v; want the probe answered, the GC read, no hog", tt.step, row.Probe, row.GC, row.Hog)
		}
		paused("after " + tt.step)
	}
}

// TestLoadsOf: each step's loads, in the floor and in another mode.
func TestLoadsOf(t *testing.T) {
	type want struct {
		hogPath       string
		floorHog, nb  bool
		small, direct bool
		closed        bool
	}
	tests := []struct {
		floor bool
		step  string
		want  want
	}{
		{false, StepIdle, want{}},
		{false, StepHogDirect, want{hogPath: pathHogDirect}},
		{false, StepHogSched, want{hogPath: pathHogSched}},
		{false, StepHogNoCkpt, want{hogPath: pathHogNoCkpt}},
		{false, StepHogSchedSm, want{hogPath: pathHogSched, small: true, direct: true}},
		{false, StepIOHeavy, want{hogPath: pathHogSched, closed: true}},
		{false, StepNeighbor, want{hogPath: pathHogSched, nb: true, small: true, direct: true}},
		{false, StepNeighborNoCkpt, want{hogPath: pathHogNoCkpt, nb: true, small: true, direct: true}},
		{true, StepIdle, want{}},
		{true, StepHogSched, want{floorHog: true}},
		{true, StepIOHeavy, want{floorHog: true, closed: true}},
		{true, StepNeighborAlone, want{nb: true}},
		{true, StepNeighbor, want{floorHog: true, nb: true, direct: true}},
	}
	for _, tt := range tests {
		m := newMeter(DefaultConfig("cpusched"), "http://127.0.0.1:1", nil, 0)
		if tt.floor {
			m.floorHog = &hogproc.Process{}
		}
		l := m.loadsOf(tt.step)
		got := want{hogPath: l.hogPath, floorHog: l.floorHog, nb: l.neighbor, small: l.small != nil, direct: l.smallDirect != nil, closed: l.probe.Rate == 0}
		if got != tt.want {
			t.Errorf("floor=%v %s: got %+v, want %+v", tt.floor, tt.step, got, tt.want)
		}
		if l.small != nil && !strings.HasSuffix(l.small.URL, pathSmall) || l.smallDirect != nil && !strings.HasSuffix(l.smallDirect.URL, pathSmallDirect) {
			t.Errorf("floor=%v %s: got small %q and direct %q", tt.floor, tt.step, l.small.URL, l.smallDirect.URL)
		}
		if list := l.smallList(); len(list) != btoi(tt.want.small)+btoi(tt.want.direct) || tt.want.small && list[0].URL != l.small.URL {
			t.Errorf("floor=%v %s: got small list %d long, want the scheduled first", tt.floor, tt.step, len(list))
		}
		m.close()
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestModeCgroups: without cgroups a mode makes none; with a CPU quota the
// neighbour shares the server's; with Cgroups it has its own, unlimited,
// the server's limited only with the quota; remove takes every one away.
func TestModeCgroups(t *testing.T) {
	tests := []struct {
		name        string
		quota       float64
		cgroups     bool
		wantDirs    int
		wantShared  bool
		wantLimited bool // the server's cgroup has the quota
	}{
		{"quota", 1.5, false, 1, true, true},
		{"cgroups", 0, true, 2, false, false},
		{"cgroups and quota", 1.5, true, 2, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, err := findCgroupFS(fakeCgroupMount(t, false))
			if err != nil {
				t.Fatal(err)
			}
			fakeKernel(t, fs)
			before := dirNames(t, fs.dir)
			cfg := DefaultConfig("cpusched")
			cfg.CPUQuota, cfg.Cgroups = tt.quota, tt.cgroups
			cgs, err := newModeCgroups(cfg, fs)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(dirNames(t, fs.dir)) - len(before); got != tt.wantDirs {
				t.Errorf("got %d cgroups made, want %d", got, tt.wantDirs)
			}
			if shared := cgs.neighbor == cgs.server; shared != tt.wantShared || cgs.server == nil || cgs.neighbor == nil {
				t.Errorf("got server %v, neighbour %v; want both, shared: %v", cgs.server, cgs.neighbor, tt.wantShared)
			}
			quota, _ := os.ReadFile(filepath.Join(cgs.server.dir, "cpu.cfs_quota_us"))
			if limited := string(quota) == "150000"; limited != tt.wantLimited {
				t.Errorf("the server's cpu.cfs_quota_us: got %q, want the quota: %v", quota, tt.wantLimited)
			}
			if !tt.wantShared {
				if q, _ := os.ReadFile(filepath.Join(cgs.neighbor.dir, "cpu.cfs_quota_us")); string(q) != "-1\n" {
					t.Errorf("the neighbour's cpu.cfs_quota_us: got %q, want no limit", q)
				}
			}
			if info := neighborInfo(cfg, cgs, nil); !strings.Contains(info, cgs.neighbor.dir) {
				t.Errorf("neighborInfo: got %q, want the neighbour's cgroup named", info)
			}
			if err := cgs.remove(); err != nil {
				t.Fatal(err)
			}
			if after := dirNames(t, fs.dir); !slices.Equal(after, before) {
				t.Errorf("after remove: got %v, want %v", after, before)
			}
		})
	}
	// None asked for: nothing made, nothing to remove.
	cgs, err := newModeCgroups(DefaultConfig("cpusched"), nil)
	if err != nil || cgs.server != nil || cgs.neighbor != nil || cgs.remove() != nil {
		t.Errorf("no cgroups: got %+v, %v", cgs, err)
	}
	if info := neighborInfo(DefaultConfig("cpusched"), cgs, nil); !strings.Contains(info, "in bench's cgroup") || strings.Contains(info, ", on CPU") {
		t.Errorf("neighborInfo without cgroups: got %q", info)
	}
	if info := neighborInfo(DefaultConfig("cpusched"), cgs, []int{1}); !strings.HasSuffix(info, "in bench's cgroup, on CPU 1") {
		t.Errorf("neighborInfo under -cpuset: got %q, want its CPUs named", info)
	}
}

// TestModeCgroupsNeighborFails: when the neighbour's cgroup cannot be
// made, the server's, made first, is still removed.
func TestModeCgroupsNeighborFails(t *testing.T) {
	fs, err := findCgroupFS(fakeCgroupMount(t, false))
	if err != nil {
		t.Fatal(err)
	}
	fakeKernel(t, fs)
	before := dirNames(t, fs.dir)
	mkdir, made := fs.mkdir, 0
	fs.mkdir = func(dir string) error {
		if made++; made == 2 {
			return os.ErrPermission
		}
		return mkdir(dir)
	}
	cfg := DefaultConfig("cpusched")
	cfg.Cgroups = true
	cgs, err := newModeCgroups(cfg, fs)
	if err == nil || !strings.Contains(err.Error(), "the neighbour's cgroup: creating the cgroup: permission denied") {
		t.Errorf("got %v, want the neighbour's cgroup's error", err)
	}
	if err := cgs.remove(); err != nil {
		t.Fatal(err)
	}
	if after := dirNames(t, fs.dir); !slices.Equal(after, before) {
		t.Errorf("after remove: got %v, want %v", after, before)
	}
}

// TestNeighborEndWatch: the responses that end after the neighbour's pause
// are counted, per load, those already past the load's p99 at the pause
// apart, and each load's own OnResponse still sees every one.
func TestNeighborEndWatch(t *testing.T) {
	e := &neighborEnd{}
	seen := 0
	probe := load.Config{OnResponse: func(load.Response) { seen++ }}
	var small load.Config // without an OnResponse of its own
	e.watch(&probe)
	e.watch(&small)
	pause := time.Now()
	resp := func(c load.Config, waitedAtPause, after time.Duration) {
		done := pause.Add(after)
		c.OnResponse(load.Response{Done: done, Latency: done.Sub(pause.Add(-waitedAtPause))})
	}
	resp(probe, 50*time.Millisecond, -time.Millisecond) // before any pause
	e.pausedAt.Store(pause.UnixNano())
	resp(probe, 50*time.Millisecond, -time.Millisecond) // before the pause
	resp(probe, time.Millisecond, time.Millisecond)     // after it, due just before
	resp(probe, 50*time.Millisecond, time.Millisecond)  // after it, in the tail
	resp(small, 5*time.Millisecond, time.Millisecond)   // in the probe's p99, past the small's
	all, tail := e.late(10, 2)                          // p99s: the probe's 10 ms, the small's 2 ms
	if all != 3 || tail != 2 || seen != 4 {
		t.Errorf("got %d late, %d in the tail, %d seen by the probe; want 3, 2, 4", all, tail, seen)
	}
}
