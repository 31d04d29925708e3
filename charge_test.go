package cpusched

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// withCPUReading has f read a task's CPU time since fn began in place of
// its thread's clock (testHooks.cpuReading), in any mode.
func withCPUReading(f func(*Task) int64) Option {
	return testHook(func(h *testHooks) { h.cpuReading = f })
}

// TestChargeFollowsTheReading drives chargeLocked through a task's
// stretches by hand: a measured stretch is charged its CPU time (at most
// its slot time) in Stats and, at least a quarter of its slot time, in
// the vruntimes; one without a reading, or after one without, its slot
// time, counted in CPUTimeFallback.
func TestChargeFollowsTheReading(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(1), withClock(clk), withoutMonitor())
	ms := int64(time.Millisecond)
	type stretch struct {
		name              string
		slot, cpu         int64 // cpu: the reading at the stretch's end (CPU since fn began), or -1, cpuUnread
		wantCPU, wantVirt int64
		wantFallback      int64
	}
	stretches := []stretch{
		{"measured", 4 * ms, 1 * ms, 1 * ms, 1 * ms, 0},
		{"measured, charged a quarter", 4 * ms, 1*ms + ms/10, ms / 10, 1 * ms, 0},
		{"more CPU than slot time", 2 * ms, 6 * ms, 2 * ms, 2 * ms, 0},
		{"not readable", 3 * ms, -1, 3 * ms, 3 * ms, 3 * ms},
		{"after one not readable", 2 * ms, 10 * ms, 2 * ms, 2 * ms, 2 * ms},
		{"measured again", 1 * ms, 10*ms + ms/2, ms / 2, ms / 2, 0},
		{"not read", 2 * ms, cpuUnread, 2 * ms, 2 * ms, 2 * ms},
		{"after one not read", 1 * ms, 11 * ms, 1 * ms, 1 * ms, 1 * ms},
	}
	err := s.Run(context.Background(), func(task *Task) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, st := range stretches {
			v0, g0 := task.ent.vruntime, task.group.vruntime
			cpu0, fb0, run0 := s.stats.cpuTime, s.stats.cpuFallback, s.stats.runTime
			gcpu0 := task.gstats.cpuTime
			clk.Advance(st.slot)
			s.chargeLocked(task, clk.Now(), st.cpu)
			// Nice 0 in a group of the default weight: virtual time is
			// run time at both levels.
			for _, c := range []struct {
				what      string
				got, want int64
			}{
				{"CPUTime", s.stats.cpuTime - cpu0, st.wantCPU},
				{"the group's CPUTime", task.gstats.cpuTime - gcpu0, st.wantCPU},
				{"CPUTimeFallback", s.stats.cpuFallback - fb0, st.wantFallback},
				{"RunTime", s.stats.runTime - run0, st.slot},
				{"the task's vruntime", task.ent.vruntime - v0, st.wantVirt},
				{"the group's vruntime", task.group.vruntime - g0, st.wantVirt},
			} {
				if c.got != c.want {
					t.Errorf("%s: %s grew by %v, want %v", st.name, c.what, time.Duration(c.got), time.Duration(c.want))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	var wantCPU, wantFallback, wantRun int64
	for _, c := range stretches {
		wantCPU += c.wantCPU
		wantFallback += c.wantFallback
		wantRun += c.slot
	}
	if st.CPUTime != time.Duration(wantCPU) || st.CPUTimeFallback != time.Duration(wantFallback) || st.RunTime != time.Duration(wantRun) {
		t.Errorf("Stats: CPUTime %v, CPUTimeFallback %v, RunTime %v; want %v, %v, %v",
			st.CPUTime, st.CPUTimeFallback, st.RunTime, time.Duration(wantCPU), time.Duration(wantFallback), time.Duration(wantRun))
	}
	if got := st.Classes[ClassNormal].CPUTime; got != st.CPUTime {
		t.Errorf("Classes[normal].CPUTime = %v, want CPUTime %v", got, st.CPUTime)
	}
	if got := st.Groups[""].CPUTime; got != st.CPUTime {
		t.Errorf(`Groups[""].CPUTime = %v, want CPUTime %v`, got, st.CPUTime)
	}
}

// TestCPUTimeIsRunTimeWhereNotMeasured: in IsolationReserve and
// IsolationNone no thread's clock is a task's, so CPUTime is RunTime, all
// of it fallback, by class and by group, running tasks included.
func TestCPUTimeIsRunTimeWhereNotMeasured(t *testing.T) {
	for _, mode := range []Isolation{IsolationReserve, IsolationNone} {
		t.Run(mode.String(), func(t *testing.T) {
			clk := newFakeClock()
			s := newTestScheduler(t, WithIsolation(mode), WithWorkers(1), withClock(clk), withoutMonitor())
			if err := s.SetGroupWeight("a", 300); err != nil {
				t.Fatal(err)
			}
			check := func(when string) {
				t.Helper()
				st := s.Stats()
				if st.CPUTime != st.RunTime || st.CPUTimeFallback != st.CPUTime {
					t.Errorf("%s: CPUTime %v, CPUTimeFallback %v, want both RunTime %v", when, st.CPUTime, st.CPUTimeFallback, st.RunTime)
				}
				for c, cs := range st.Classes {
					if cs.CPUTime != cs.RunTime {
						t.Errorf("%s: class %v: CPUTime %v, want RunTime %v", when, Class(c), cs.CPUTime, cs.RunTime)
					}
				}
				for name, gs := range st.Groups {
					if gs.CPUTime != gs.RunTime {
						t.Errorf("%s: group %q: CPUTime %v, want RunTime %v", when, name, gs.CPUTime, gs.RunTime)
					}
				}
				if st.OtherGroups.CPUTime != st.OtherGroups.RunTime {
					t.Errorf("%s: other groups: CPUTime %v, want RunTime %v", when, st.OtherGroups.CPUTime, st.OtherGroups.RunTime)
				}
			}
			for _, opts := range [][]TaskOption{{WithGroup("a")}, {WithGroup("b"), WithClass(ClassBatch)}, nil} {
				err := s.Run(context.Background(), func(task *Task) error {
					for range 3 {
						clk.Advance(int64(time.Millisecond))
						s.tick()
						if err := task.Checkpoint(); err != nil {
							return err
						}
						task.Blocking(func() { clk.Advance(int64(time.Millisecond)) })
					}
					clk.Advance(int64(time.Millisecond))
					check("while a task runs")
					return nil
				}, opts...)
				if err != nil {
					t.Fatal(err)
				}
			}
			check("after the tasks")
			if st := s.Stats(); st.RunTime != 12*time.Millisecond {
				t.Errorf("RunTime %v, want the 12ms the tasks held their slot", st.RunTime)
			}
		})
	}
}

// cpuShares runs one task per rate on a single worker with a fake clock
// and a fake CPU reading (withCPUReading), as shareRun does: each step
// advances the clock by its length and the task's CPU time by rate times
// that. Each task is in a group of its own, of the default weight. It
// returns the slot time and the CPU time each task got.
func cpuShares(t *testing.T, total time.Duration, rates ...float64) (slot, cpu []time.Duration) {
	t.Helper()
	var readings sync.Map // *Task -> *atomic.Int64, its CPU time since fn began
	read := func(task *Task) int64 {
		if c, ok := readings.Load(task); ok {
			return c.(*atomic.Int64).Load()
		}
		return -1
	}
	cpus := make([]atomic.Int64, len(rates))
	specs := make([][]TaskOption, len(rates))
	for i := range specs {
		specs[i] = []TaskOption{WithGroup(string(rune('a' + i)))}
	}
	slot = shareRunWith(t, total, []Option{withCPUReading(read)}, nil, func(i int, task *Task, step int64) {
		readings.LoadOrStore(task, &cpus[i])
		cpus[i].Add(int64(rates[i] * float64(step)))
	}, specs...)
	for i := range cpus {
		cpu = append(cpu, time.Duration(cpus[i].Load()))
	}
	return slot, cpu
}

// TestGroupSharesFollowCPU: two groups of equal weight, one whose thread
// the kernel runs half the time it holds its slot: the weights share the
// CPU time, so that group holds its slot twice as long. One whose thread
// never runs (it waits inside fn without Blocking) is charged a quarter
// of its slot time, and holds its slot four times as long, not all the
// time.
func TestGroupSharesFollowCPU(t *testing.T) {
	slot, cpu := cpuShares(t, 3*time.Second, 0.5, 1)
	checkRatios(t, cpu, []float64{1, 1}, 0.10)
	checkRatios(t, slot, []float64{2, 1}, 0.10)

	slot, _ = cpuShares(t, 3*time.Second, 0, 1)
	checkRatios(t, slot, []float64{minChargeDivisor, 1}, 0.10)
}
