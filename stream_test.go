package cpusched

import (
	"context"
	"fmt"
	"github.com/cpusched/cpusched/internal/israce"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// streamSpec is a fake-clock workload: long tasks that run for the whole
// test, and a stream of small tasks arriving at a fixed interval.
type streamSpec struct {
	slice     time.Duration
	long      [][]TaskOption // one long task per entry
	small     []TaskOption   // the small tasks' options
	smallWork time.Duration  // slot time each small task needs
	load      float64        // the small tasks' share of the slot time: smallWork/interval
	total     time.Duration
	setup     func(*Scheduler)
}

// streamResult is what a streamRun measured, by the scheduler's own clock.
type streamResult struct {
	long      []time.Duration // slot time of each long task
	smallWait []time.Duration // each small task's Waited
}

// streamRun runs spec on one worker with a fake clock. Whoever holds the
// slot advances the clock in steps of 50us, ends slices as the monitor
// would, submits the small tasks that are due (so arrivals follow the
// fake clock) and calls Checkpoint.
func streamRun(t *testing.T, spec streamSpec) streamResult {
	t.Helper()
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(1), WithSlice(spec.slice), withClock(clk), withoutMonitor())
	if spec.setup != nil {
		spec.setup(s)
	}
	const step = int64(50 * time.Microsecond)
	interval := int64(float64(spec.smallWork) / spec.load)
	start := clk.Now()
	end := start + int64(spec.total)

	var mu sync.Mutex
	var waits []time.Duration
	var smalls sync.WaitGroup
	nextArrival := start
	var small func(*Task) error
	// arrive submits the small tasks due by now; it runs on the slot
	// holder's goroutine, one at a time.
	arrive := func() {
		for now := clk.Now(); nextArrival <= now && now < end; nextArrival += interval {
			h, err := s.Go(context.Background(), small, spec.small...)
			if err != nil {
				t.Error(err)
				return
			}
			smalls.Add(1)
			go func() { defer smalls.Done(); h.Wait() }()
		}
	}
	work := func(task *Task, d int64, counter *atomic.Int64) error {
		for done := int64(0); done < d && clk.Now() < end; done += step {
			clk.Advance(step)
			if counter != nil {
				counter.Add(step)
			}
			task.s.tick()
			arrive()
			if err := task.Checkpoint(); err != nil {
				return err
			}
		}
		return nil
	}
	small = func(task *Task) error {
		err := work(task, int64(spec.smallWork), nil)
		mu.Lock()
		waits = append(waits, task.Waited())
		mu.Unlock()
		return err
	}
	got := make([]atomic.Int64, len(spec.long))
	release, gate := holdSlot(t, s)
	var wg sync.WaitGroup
	for i, opts := range spec.long {
		h, err := s.Go(context.Background(), func(task *Task) error {
			return work(task, end, &got[i])
		}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); h.Wait() }()
	}
	release()
	gate.Wait()
	wg.Wait()
	smalls.Wait()
	r := streamResult{long: make([]time.Duration, len(spec.long)), smallWait: waits}
	for i := range got {
		r.long[i] = time.Duration(got[i].Load())
	}
	return r
}

// p99 returns the 99th percentile of ds.
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*99)/100]
}

// TestSmallTaskStreamKeepsNiceShares runs long tasks at nice 0, 5 and 10
// against a stream of new small tasks taking 10% to 75% of the slot time,
// each needing less than a slice or more than its first request: whatever
// is left must still be shared 1024:335:110 among the long tasks (within
// 5%), and the small tasks must not wait behind them (their p99 wait is
// logged: it was up to 5.7 ms with 1 ms slices and 30 ms with 10 ms ones
// before V became the average of the vruntimes and deadlines were renewed
// by vruntime; cpusched bench measures it for real).
func TestSmallTaskStreamKeepsNiceShares(t *testing.T) {
	for _, tc := range []struct {
		slice, work time.Duration
		load        float64
	}{
		{DefaultSlice, 250 * time.Microsecond, 0.10}, {DefaultSlice, 250 * time.Microsecond, 0.25},
		{DefaultSlice, 250 * time.Microsecond, 0.50}, {DefaultSlice, 250 * time.Microsecond, 0.75},
		{DefaultSlice, time.Millisecond, 0.25}, {DefaultSlice, time.Millisecond, 0.50},
		{osPrioritySlice, 250 * time.Microsecond, 0.10}, {osPrioritySlice, 250 * time.Microsecond, 0.25},
		{osPrioritySlice, 250 * time.Microsecond, 0.50}, {osPrioritySlice, 250 * time.Microsecond, 0.75},
		{osPrioritySlice, 5 * time.Millisecond, 0.50},
	} {
		load := tc.load
		t.Run(fmt.Sprintf("slice%v/work%v/load%.0f%%", tc.slice, tc.work, 100*load), func(t *testing.T) {
			if tc.slice > DefaultSlice && (israce.Enabled || testing.Short()) {
				t.Skip("40 s of fake time: deterministic, so run without -race and -short only")
			}
			r := streamRun(t, streamSpec{
				slice:     tc.slice,
				long:      [][]TaskOption{{WithNice(0)}, {WithNice(5)}, {WithNice(10)}},
				smallWork: tc.work,
				load:      load,
				// EEVDF's lag bound is about one request, so the long
				// tasks must get hundreds of slices for their shares to
				// be within 5%: 4 s of 1 ms slices, 40 s of 10 ms ones.
				total: 4000 * tc.slice,
			})
			t.Logf("long tasks %v; %d small tasks, wait p99 %v", r.long, len(r.smallWait), p99(r.smallWait))
			checkRatios(t, r.long, []float64{1024, 335, 110}, 0.05)
		})
	}
}

// TestSmallTaskStreamKeepsGroupShares is the same with the long tasks in
// two groups weighted 100 and 300 (three tasks in the first) and the small
// tasks in the default group: the groups' split holds within 5%. The
// default group's share is 100/500, so the small load stays below 20%
// (above it, the small tasks queue up, as they should: their group has had
// its share).
func TestSmallTaskStreamKeepsGroupShares(t *testing.T) {
	for _, load := range []float64{0.05, 0.15} {
		t.Run(fmt.Sprintf("load%.0f%%", 100*load), func(t *testing.T) {
			r := streamRun(t, streamSpec{
				slice: time.Millisecond,
				long: [][]TaskOption{
					{WithGroup("a")}, {WithGroup("a")}, {WithGroup("a")}, {WithGroup("b")},
				},
				smallWork: 250 * time.Microsecond,
				load:      load,
				total:     4 * time.Second,
				setup: func(s *Scheduler) {
					if err := s.SetGroupWeight("b", 300); err != nil {
						t.Fatal(err)
					}
				},
			})
			a := r.long[0] + r.long[1] + r.long[2]
			t.Logf("group a %v, b %v; %d small tasks, wait p99 %v", a, r.long[3], len(r.smallWait), p99(r.smallWait))
			checkRatios(t, []time.Duration{a, r.long[3]}, []float64{100, 300}, 0.05)
		})
	}
}
