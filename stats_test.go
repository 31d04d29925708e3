package cpusched

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHistogramBuckets(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int // bucket
	}{
		{0, 0},
		{time.Microsecond, 0},
		{time.Microsecond + 1, 1},
		{2 * time.Microsecond, 1},
		{3 * time.Microsecond, 2},
		{time.Millisecond, 10}, // 1024us is the first bound >= 1000us
		{1024 * time.Microsecond, 10},
		{1024*time.Microsecond + 1, 11},
		{time.Microsecond << 20, 20},
		{time.Microsecond<<20 + 1, 21},
		{time.Hour, 21},
	}
	for _, tt := range tests {
		var h Histogram
		h.record(int64(tt.d))
		got := -1
		for i, c := range h.Counts {
			if c == 1 {
				got = i
			}
		}
		if got != tt.want || h.Count() != 1 || h.Sum != tt.d {
			t.Errorf("record(%v): bucket %d, count %d, sum %v; want bucket %d, count 1, sum %v", tt.d, got, h.Count(), h.Sum, tt.want, tt.d)
		}
		if got >= 0 && (tt.d > BucketBound(got) || got > 0 && tt.d <= BucketBound(got-1)) {
			t.Errorf("record(%v) in bucket %d, outside (%v, %v]", tt.d, got, BucketBound(got-1), BucketBound(got))
		}
	}
	if got := BucketBound(HistogramBuckets - 1); got != math.MaxInt64 {
		t.Errorf("BucketBound(last) = %v, want math.MaxInt64", got)
	}
}

// checkHistograms checks, once every task has ended, that each started task
// was counted once in the queue-wait and run-time histograms of its class and
// of its group, and that the run-time histograms add up to RunTime.
func checkHistograms(t interface{ Fatalf(string, ...any) }, st Stats) {
	var waits, runs, gwaits, gruns uint64
	var runSum, gRunSum time.Duration
	for _, c := range st.Classes {
		waits += c.QueueWaits.Count()
		runs += c.RunTimes.Count()
		runSum += c.RunTimes.Sum
	}
	for _, g := range append(slices.Collect(maps.Values(st.Groups)), st.OtherGroups) {
		gwaits += g.QueueWaits.Count()
		gruns += g.RunTimes.Count()
		gRunSum += g.RunTimes.Sum
	}
	if waits != runs || gwaits != waits || gruns != runs || waits > st.Submitted {
		t.Fatalf("histogram counts: class waits %d, runs %d; group waits %d, runs %d; submitted %d: want equal counts, at most Submitted", waits, runs, gwaits, gruns, st.Submitted)
	}
	if runSum != st.RunTime || gRunSum != st.RunTime {
		t.Fatalf("run-time histogram sums: classes %v, groups %v; want RunTime %v", runSum, gRunSum, st.RunTime)
	}
}

// TestStatsHistograms records known waits and run times on a fake clock.
func TestStatsHistograms(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(1), withClock(clk), withoutMonitor())
	for _, g := range []string{"a", "b"} { // tracked: their own GroupStats
		if err := s.SetGroupWeight(g, DefaultGroupWeight); err != nil {
			t.Fatal(err)
		}
	}
	release, h := holdSlot(t, s, WithGroup("a"))
	clk.Advance(int64(3 * time.Millisecond)) // the holder runs 3 ms
	queued, err := s.Go(context.Background(), func(*Task) error {
		clk.Advance(int64(500 * time.Microsecond))
		return nil
	}, WithClass(ClassBatch), WithGroup("b"))
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(int64(time.Millisecond)) // it waits 1 ms more
	release()
	if err := h.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := queued.Wait(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	checkHistograms(t, st)
	tests := []struct {
		name      string
		got       Histogram
		wantCount uint64
		wantSum   time.Duration
	}{
		{"normal waits", st.Classes[ClassNormal].QueueWaits, 1, 0},
		{"normal runs", st.Classes[ClassNormal].RunTimes, 1, 4 * time.Millisecond},
		{"batch waits", st.Classes[ClassBatch].QueueWaits, 1, time.Millisecond},
		{"batch runs", st.Classes[ClassBatch].RunTimes, 1, 500 * time.Microsecond},
		{"group a runs", st.Groups["a"].RunTimes, 1, 4 * time.Millisecond},
		{"group b waits", st.Groups["b"].QueueWaits, 1, time.Millisecond},
	}
	for _, tt := range tests {
		if tt.got.Count() != tt.wantCount || tt.got.Sum != tt.wantSum {
			t.Errorf("%s: count %d, sum %v; want %d, %v", tt.name, tt.got.Count(), tt.got.Sum, tt.wantCount, tt.wantSum)
		}
	}
}

// TestWaitedNeverBelowZero: a slot handed on by a goroutine that read the
// clock before the task it picks began to wait (finish reads it before
// taking the lock) gives that task a wait of 0, not below, and a slot
// that begins when its wait began.
func TestWaitedNeverBelowZero(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1), withClock(newFakeClock()), withoutMonitor())
	task, _, err := s.newTask(context.Background(), emptyTask, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	queued := int64(10 * time.Millisecond)
	s.mu.Lock()
	task.gstats = s.groupStatsLocked(task.groupName)
	task.since = queued
	s.takeSlotLocked(task, queued-int64(time.Millisecond), false)
	waited, since := task.Waited(), task.since
	s.releaseSlotLocked(task)
	s.dropWatchLocked(task)
	s.mu.Unlock()
	if waited != 0 || since != queued {
		t.Errorf("Waited %v, slot from %v; want 0, from %v", waited, time.Duration(since), time.Duration(queued))
	}
}

// TestTaskWaited checks Waited on a fake clock: the first wait, then the
// wait for the slot back after a Checkpoint gave it up.
func TestTaskWaited(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(1), withClock(clk), withoutMonitor())
	release, h := holdSlot(t, s)
	var mid, end time.Duration
	step, cQueued := make(chan struct{}), make(chan struct{})
	b, err := s.Go(context.Background(), func(task *Task) error {
		mid = task.Waited()
		clk.Advance(int64(2 * time.Millisecond)) // past B's slice
		task.s.tick()
		close(step)
		<-cQueued
		if err := task.Checkpoint(); err != nil { // C waits: B yields
			return err
		}
		end = task.Waited()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(int64(time.Millisecond)) // B waits 1 ms for its first slot
	release()
	if err := h.Wait(); err != nil {
		t.Fatal(err)
	}
	<-step
	c, err := s.Go(context.Background(), func(*Task) error {
		clk.Advance(int64(3 * time.Millisecond)) // B waits 3 ms for its slot back
		return nil
	})
	close(cQueued)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(b.Wait(), c.Wait()); err != nil {
		t.Fatal(err)
	}
	if mid != time.Millisecond || end != 4*time.Millisecond {
		t.Errorf("Waited: %v at start, %v at end; want 1ms, 4ms", mid, end)
	}
}

func TestCheckTaskOptions(t *testing.T) {
	tests := []struct {
		opts []TaskOption
		want string // "" means nil
	}{
		{nil, ""},
		{[]TaskOption{WithNice(19), WithClass(ClassBatch), WithGroup("g"), nil}, ""},
		{[]TaskOption{WithNice(20)}, "WithNice(20)"},
		{[]TaskOption{WithClass(Class(9))}, "WithClass(9)"},
		{[]TaskOption{WithTaskSlice(time.Hour)}, "WithTaskSlice"},
	}
	for _, tt := range tests {
		err := CheckTaskOptions(tt.opts...)
		if got := errString(err); tt.want == "" && err != nil || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("CheckTaskOptions(%d options) = %q, want %q", len(tt.opts), got, tt.want)
		}
	}
}

func TestTaskOptionsGroup(t *testing.T) {
	tests := []struct {
		opts      []TaskOption
		wantGroup string
		wantErr   string // "" means nil
	}{
		{nil, "", ""},
		{[]TaskOption{WithNice(5), nil}, "", ""},
		{[]TaskOption{WithGroup("a"), WithNice(5)}, "a", ""},
		{[]TaskOption{WithGroup("a"), WithGroup("b")}, "b", ""}, // the last one, as Run applies them
		{[]TaskOption{WithGroup("a"), WithGroup("")}, "", ""},
		{[]TaskOption{WithGroup("a"), WithNice(20)}, "", "WithNice(20)"},
	}
	for _, tt := range tests {
		group, err := TaskOptionsGroup(tt.opts...)
		if got := errString(err); group != tt.wantGroup || tt.wantErr == "" && err != nil || tt.wantErr != "" && !strings.Contains(got, tt.wantErr) {
			t.Errorf("TaskOptionsGroup(%d options) = %q, %q; want %q, %q", len(tt.opts), group, got, tt.wantGroup, tt.wantErr)
		}
	}
}

func TestTaskOptionsPlace(t *testing.T) {
	tests := []struct {
		opts    []TaskOption
		want    TaskPlace
		wantErr string // "" means nil
	}{
		{nil, TaskPlace{}, ""},
		{[]TaskOption{nil, WithTaskSlice(time.Millisecond)}, TaskPlace{}, ""},
		{[]TaskOption{WithGroup("a"), WithNice(5), WithClass(ClassBatch)}, TaskPlace{"a", ClassBatch, 5}, ""},
		{[]TaskOption{WithNice(5), WithNice(-3), WithClass(ClassIdle), WithClass(ClassRealtime)}, TaskPlace{"", ClassRealtime, -3}, ""}, // the last of each
		{[]TaskOption{WithGroup("a"), WithClass(Class(9))}, TaskPlace{}, "WithClass(9)"},
	}
	for _, tt := range tests {
		place, err := TaskOptionsPlace(tt.opts...)
		if got := errString(err); place != tt.want || tt.wantErr == "" && err != nil || tt.wantErr != "" && !strings.Contains(got, tt.wantErr) {
			t.Errorf("TaskOptionsPlace(%d options) = %+v, %q; want %+v, %q", len(tt.opts), place, got, tt.want, tt.wantErr)
		}
	}
	opts := []TaskOption{WithGroup("a"), WithNice(1)}
	if n := testing.AllocsPerRun(100, func() { TaskOptionsPlace(opts...) }); n != 0 {
		t.Errorf("TaskOptionsPlace allocates %v times, want 0", n)
	}
}

// TestClassQueueTime checks ClassStats.QueueTime on a fake clock: it
// counts a queued task's wait while it lasts, not only once the task
// starts, and the wait of a task removed while queued.
func TestClassQueueTime(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(1), withClock(clk), withoutMonitor())
	release, h := holdSlot(t, s)
	qt := func(c Class) time.Duration { return s.Stats().Classes[c].QueueTime }
	a, err := s.Go(context.Background(), func(*Task) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b, err := s.Go(ctx, func(*Task) error { return nil }, WithClass(ClassBatch))
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(int64(2 * time.Millisecond))
	if got, want := qt(ClassNormal), 2*time.Millisecond; got != want {
		t.Errorf("a Normal task queued 2ms: QueueTime %v, want %v (counted while it waits)", got, want)
	}
	if got := s.Stats().Classes[ClassNormal].QueueWaits.Sum; got != 0 {
		t.Errorf("QueueWaits.Sum %v before the task started, want 0", got)
	}
	cancel() // b leaves the queue after 2 ms
	if err := b.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("the removed task: got %v, want context.Canceled", err)
	}
	clk.Advance(int64(3 * time.Millisecond))
	if got, want := qt(ClassBatch), 2*time.Millisecond; got != want {
		t.Errorf("a Batch task removed after 2ms: QueueTime %v, want %v", got, want)
	}
	if got, want := qt(ClassNormal), 5*time.Millisecond; got != want {
		t.Errorf("a Normal task queued 5ms: QueueTime %v, want %v", got, want)
	}
	release()
	if err := errors.Join(h.Wait(), a.Wait()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(int64(time.Millisecond)) // no task queued: nothing grows
	if got, want := qt(ClassNormal), 5*time.Millisecond; got != want {
		t.Errorf("after the task started: QueueTime %v, want %v", got, want)
	}
	if got := s.Stats().Classes[ClassNormal].QueueWaits.Sum; got != 5*time.Millisecond {
		t.Errorf("QueueWaits.Sum %v once the task started, want 5ms", got)
	}
}

// TestRunTimeWhileRunning checks Stats' RunTime on a fake clock: a task
// that makes no Checkpoint shows its slot time so far while it runs, in
// the totals, its class and its group, and the figures only grow as it is
// charged and ends.
func TestRunTimeWhileRunning(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(1), withClock(clk), withoutMonitor())
	if err := s.SetGroupWeight("g", 100); err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	h, err := s.Go(context.Background(), func(*Task) error {
		close(started)
		<-release // holds the slot, no Checkpoint
		return nil
	}, WithGroup("g"))
	if err != nil {
		t.Fatal(err)
	}
	<-started
	runTimes := func() [3]time.Duration {
		st := s.Stats()
		return [3]time.Duration{st.RunTime, st.Classes[ClassNormal].RunTime, st.Groups["g"].RunTime}
	}
	clk.Advance(int64(3 * time.Millisecond))
	if got, want := runTimes(), [3]time.Duration{3 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond}; got != want {
		t.Errorf("3ms into a task without Checkpoint: RunTime, its class's, its group's %v, want %v", got, want)
	}
	clk.Advance(int64(2 * time.Millisecond))
	close(release)
	if err := h.Wait(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(int64(time.Millisecond)) // nothing runs: nothing grows
	if got, want := runTimes(), [3]time.Duration{5 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond}; got != want {
		t.Errorf("after the task ran 5ms and ended: %v, want %v", got, want)
	}
}
