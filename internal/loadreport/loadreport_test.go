package loadreport

import (
	"cmp"
	"context"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/leakcheck"
	"github.com/cpusched/cpusched/internal/schedtest"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// fake is a Meter's source whose clock, Stats and CPU time a test sets.
type fake struct {
	mu     sync.Mutex
	now    time.Duration
	st     cpusched.Stats
	cpu    time.Duration
	cpuOK  bool
	gone   bool
	budget float64
	// periods and throttled are the cgroup quota's; quotaOK false: none.
	periods, throttled int64
	quotaOK            bool
	// group is the CPU time of every process in the cgroup (the
	// process's and others'); groupOK false: unknown.
	group   time.Duration
	groupOK bool
	stats   int // Stats calls
}

func newFake(workers int, budget float64) *fake {
	return &fake{st: cpusched.Stats{Workers: workers}, cpuOK: true, budget: budget}
}

func (f *fake) source() source {
	return source{
		now: func() time.Duration { f.mu.Lock(); defer f.mu.Unlock(); return f.now },
		stats: func() (cpusched.Stats, bool) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.stats++
			return f.st, !f.gone
		},
		cpu:    func() (time.Duration, bool) { f.mu.Lock(); defer f.mu.Unlock(); return f.cpu, f.cpuOK },
		budget: func() float64 { f.mu.Lock(); defer f.mu.Unlock(); return f.budget },
		quota: func() (int64, int64, bool) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.periods, f.throttled, f.quotaOK
		},
		groupCPU: func() (time.Duration, bool) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.group, f.groupOK
		},
	}
}

// load is what happens in one step of a test: time passes, and the
// classes use slot time and wait, the process CPU, the quota's periods.
type load struct {
	d                          time.Duration
	normal, realtime           time.Duration // slot time
	batch, idle                time.Duration
	normalQueue, realtimeQueue time.Duration // time queued for a first slot (ClassStats.QueueTime)
	cpu                        time.Duration
	periods, throttled         int64         // the cgroup quota's periods, and those in which it ran out
	others                     time.Duration // the CPU the cgroup's other processes used
}

func (f *fake) add(l load) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now += l.d
	c := &f.st.Classes
	c[cpusched.ClassNormal].RunTime += l.normal
	c[cpusched.ClassRealtime].RunTime += l.realtime
	c[cpusched.ClassBatch].RunTime += l.batch
	c[cpusched.ClassIdle].RunTime += l.idle
	c[cpusched.ClassNormal].QueueTime += l.normalQueue
	c[cpusched.ClassRealtime].QueueTime += l.realtimeQueue
	f.cpu += l.cpu
	f.group += l.cpu + l.others
	f.periods += l.periods
	f.throttled += l.throttled
}

// tasks sets the tasks in the scheduler now: of ClassNormal, started
// (holding a slot or parked at a Checkpoint) and queued for a first slot;
// of ClassIdle, started; and how many of all are in Blocking.
func (f *fake) tasks(normalStarted, normalQueued, idleStarted, blocked int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := &f.st.Classes
	c[cpusched.ClassNormal].Submitted = uint64(normalStarted + normalQueued)
	c[cpusched.ClassNormal].QueueWaits.Counts[0] = uint64(normalStarted)
	c[cpusched.ClassIdle].Submitted = uint64(idleStarted)
	c[cpusched.ClassIdle].QueueWaits.Counts[0] = uint64(idleStarted)
	f.st.Queued, f.st.Started, f.st.Blocked = normalQueued, normalStarted+idleStarted, blocked
}

func near(got, want float64) bool { return math.Abs(got-want) < 1e-9 }

func TestApplicationUtilization(t *testing.T) {
	// One second of load on a scheduler of 2 slots with a CPU budget of 2
	// (unless a case says otherwise), then a report: Application is the
	// largest of the Realtime and Normal slot time (where all the classes'
	// slot time exceeds the process's CPU time, their share of it) over
	// the slot-seconds, the utilization their tasks' time queued per slot
	// implies, and the CPU's saturation: the CPU net of Batch and Idle
	// slot time over the CPU-seconds, plus the share of the quota's
	// periods in which it ran out.
	const s = time.Second
	const ms = time.Millisecond
	tests := []struct {
		name    string
		workers int     // 2 if 0
		budget  float64 // 2 if 0
		load    load
		left    time.Duration // a call that left while queued, after waiting this
		calls   int           // calls that ran
		wantApp float64
		wantCPU float64
	}{
		{"normal slot time", 0, 0, load{d: s, normal: s, cpu: s}, 0, 0, 0.5, 0.5},
		{"realtime counts as normal", 0, 0, load{d: s, realtime: s / 2, normal: s / 2, cpu: s}, 0, 0, 0.5, 0.5},
		{"both slots busy", 0, 0, load{d: s, normal: 2 * s, cpu: 2 * s}, 0, 0, 1, 1},
		{"two queued per slot: the utilization they imply, below the slots' 1", 0, 0, load{d: s, normal: 2 * s, normalQueue: 3 * s, realtimeQueue: s, cpu: 2 * s}, 0, 0, 1, 1},
		{"four queued per slot: theirs, above the slot time", 0, 0, load{d: s, normal: s / 10, normalQueue: 7 * s, realtimeQueue: s, cpu: 200 * ms}, 0, 0, 2*math.Sqrt2 - 2, 0.1},
		{"a call that left while queued: the scheduler's queue time counts it, End does not again", 0, 0, load{d: s, normal: s, normalQueue: 3 * s, cpu: s}, s, 0, (math.Sqrt(8.25) - 1.5) / 2, 0.5},
		{"batch and idle do not count", 0, 0, load{d: s, batch: s, idle: s, cpu: 2 * s}, 0, 0, 0, 1},
		{"nor do they, with calls: the floor", 0, 0, load{d: s, batch: s, idle: s, cpu: 2 * s}, 0, 3, minApplication, 1},
		{"the CPU saturated by other work", 0, 0, load{d: s, normal: s / 10, cpu: 1800 * ms}, 0, 0, 0.9, 0.9},
		{"the CPU net of idle", 0, 0, load{d: s, normal: s / 2, idle: s, cpu: 1800 * ms}, 0, 0, 0.4, 0.9},
		{"idle slot time beyond the CPU it used", 0, 0, load{d: s, idle: 2 * s, cpu: s}, 0, 0, 0, 0.5},
		{"slots held beyond the process's CPU count as the CPU", 0, 0, load{d: s, normal: 2 * s, cpu: 600 * ms}, 0, 0, 0.3, 0.3},
		{"and the tasks queued meanwhile as queued", 0, 0, load{d: s, normal: 2 * s, normalQueue: s, cpu: 600 * ms}, 0, 0, 0.5, 0.3},
		{"with a batch job, each class as its share of the CPU", 1, 1, load{d: s, normal: s / 2, idle: s / 2, cpu: 800 * ms}, 0, 0, 0.4, 0.8},
		{"the same share of the CPU for the saturation's net", 1, 1, load{d: s, normal: s / 4, batch: s / 4, idle: s / 2, cpu: 900 * ms}, 0, 0, 0.225, 0.9},
		{"queued tasks below the CPU's saturation", 0, 0, load{d: s, normal: s / 10, normalQueue: s, cpu: 1800 * ms}, 0, 0, 0.9, 0.9},
		{"queued tasks below the slot time", 0, 0, load{d: s, normal: 2 * s, normalQueue: s, cpu: 2 * s}, 0, 0, 1, 1},
		{"queued tasks above it, their utilization below the CPU's saturation", 0, 0, load{d: s, normal: s / 10, normalQueue: 3 * s, cpu: 1800 * ms}, 0, 0, 0.9, 0.9},
		{"a quota below the slots: the CPU's saturation", 1, 0.3, load{d: s, normal: 250 * ms, cpu: 200 * ms}, 0, 0, 2.0 / 3, 2.0 / 3},
		{"a budget above the slots: the cap is CPU time, not its share", 1, 2, load{d: s, normal: s, cpu: s}, 0, 0, 1, 0.5},
		{"a quota that ran out adds its share of the periods", 1, 0.3, load{d: s, normal: 250 * ms, cpu: 270 * ms, periods: 10, throttled: 3}, 0, 0, 1.2, 0.9},
		{"a quota that did not run out adds nothing", 1, 0.3, load{d: s, normal: 250 * ms, cpu: 150 * ms, periods: 10}, 0, 0, 0.5, 0.5},
		{"a quota another process of the cgroup spent: the process's share of the periods", 1, 0.8, load{d: s, normal: 70 * ms, cpu: 70 * ms, periods: 10, throttled: 7, others: 730 * ms}, 0, 0, 0.7*70.0/800 + 70.0/800, 70.0 / 800},
		{"idle", 0, 0, load{d: s}, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			workers, budget := cmp.Or(tt.workers, 2), cmp.Or(tt.budget, 2)
			f := newFake(workers, budget)
			f.quotaOK, f.groupOK = true, true
			m := newMeter(f.source())
			for range tt.calls {
				m.Arrive()
				m.End(Ran, 0)
			}
			if tt.left > 0 {
				m.Arrive()
				m.End(Left, tt.left)
			}
			f.add(tt.load)
			r := m.Report()
			if !near(r.Application, tt.wantApp) || !near(r.CPU, tt.wantCPU) {
				t.Errorf("got application %v, cpu %v; want %v, %v", r.Application, r.CPU, tt.wantApp, tt.wantCPU)
			}
		})
	}
}

// TestOverload: an overload trial's scenario on a fake clock. Two slots, a quiet
// second, then six tasks that hold both slots (two run, four wait), and a
// call every 0.1s: the window starts at the sample its first took, so the
// slots read busy at once, and from 0.3s in (a span of 0.25s or more held
// all through) above 1, with more tasks in than there are slots (before
// its fix, 0.4 at 0.7s in); once the tasks end, a fall over a second,
// to 0.
func TestOverload(t *testing.T) {
	const ms = time.Millisecond
	f := newFake(2, 2)
	m := newMeter(f.source())
	f.add(load{d: time.Second})
	m.Arrive() // the first of the six: a sample from before them
	f.tasks(6, 0, 0, 0)
	for i, want := range []float64{1, 1, 3, 3, 3, 3, 3} {
		f.add(load{d: 100 * ms, normal: 200 * ms, cpu: 200 * ms})
		m.Arrive()
		if got := m.Report().Application; !near(got, want) {
			t.Errorf("%v into the overload: got %v, want %v", time.Duration(i+1)*100*ms, got, want)
		}
	}
	f.tasks(0, 0, 0, 0)
	prev := math.Inf(1)
	for i := range 12 {
		f.add(load{d: 100 * ms})
		got := m.Report().Application
		if got > prev || i < 5 && got < 0.3 || i >= 10 && got != 0 {
			t.Errorf("%v after the end: got %v (before it %v), want a fall to 0 over a second", time.Duration(i+1)*100*ms, got, prev)
		}
		prev = got
	}
}

func TestOverloadCapped(t *testing.T) {
	// A slot held all through with 50 tasks in: maxOverload, not 50.
	f := newFake(1, 1)
	m := newMeter(f.source())
	f.add(load{d: time.Second})
	m.Arrive()
	f.tasks(50, 0, 0, 0)
	for range 5 {
		f.add(load{d: 100 * time.Millisecond, normal: 100 * time.Millisecond, cpu: 100 * time.Millisecond})
		m.Arrive()
	}
	if got := m.Report().Application; got != maxOverload {
		t.Errorf("50 tasks on a held slot: got %v, want the cap, %v", got, maxOverload)
	}
}

func TestOverloadNotABurst(t *testing.T) {
	// Tasks waiting at the sample, but the slots held only 70% of the
	// time since the sample 0.25s before: the replica's ordinary bursts,
	// read by the window's averages alone.
	f := newFake(1, 1)
	m := newMeter(f.source())
	f.add(load{d: 250 * time.Millisecond, normal: 175 * time.Millisecond, cpu: 175 * time.Millisecond})
	f.tasks(5, 0, 0, 0)
	if got := m.Report().Application; !near(got, 0.7) {
		t.Errorf("got %v, want the slot's share held, 0.7", got)
	}
}

func TestLiveLatencyRelevant(t *testing.T) {
	tests := []struct {
		name                                             string
		normalStarted, normalQueued, idle, blocked, want int
	}{
		{"none", 0, 0, 0, 0, 0},
		{"started and queued", 2, 4, 0, 0, 6},
		{"a batch job parked behind a call: not counted", 1, 0, 1, 0, 1},
		{"calls in Blocking: not counted", 3, 1, 0, 2, 2},
		{"more in Blocking than Normal tasks started: the job's, taken for calls'", 1, 0, 1, 2, 0},
	}
	for _, tt := range tests {
		f := newFake(1, 1)
		f.tasks(tt.normalStarted, tt.normalQueued, tt.idle, tt.blocked)
		if got := liveLatencyRelevant(&f.st); got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestArriveSamples(t *testing.T) {
	// A call's arrival takes a sample when the last is a step old, and
	// only then.
	f := newFake(1, 1)
	m := newMeter(f.source())
	count := func() int { f.mu.Lock(); defer f.mu.Unlock(); return f.stats }
	before := count()
	m.Arrive()
	f.add(load{d: step})
	m.Arrive()
	m.Arrive()
	if got := count() - before; got != 1 {
		t.Errorf("got %d Stats calls for three arrivals, the second a step after the first, want 1", got)
	}
}

func TestCPUUnknown(t *testing.T) {
	// Without the process's CPU time: CPU is -1 and Application the demand.
	f := newFake(1, 1)
	f.cpuOK = false
	m := newMeter(f.source())
	f.add(load{d: time.Second, normal: time.Second / 4, idle: time.Second / 2})
	if r := m.Report(); r.CPU != -1 || !near(r.Application, 0.25) {
		t.Errorf("got cpu %v, application %v; want -1, 0.25", r.CPU, r.Application)
	}
}

func TestRates(t *testing.T) {
	// QPS and EPS count the calls up to the Report call, also those after
	// the newest sample, over the window (or since the Meter was made).
	f := newFake(1, 1)
	m := newMeter(f.source())
	f.add(load{d: 500 * time.Millisecond})
	end := func(o Outcome, wait time.Duration) { m.Arrive(); m.End(o, wait) }
	for range 10 {
		end(Ran, time.Millisecond)
	}
	for range 4 {
		end(Shed, 0)
	}
	end(Refused, 0)
	end(Left, 0)
	r := m.Report() // a sample at 0.5 s; its interval starts at 0
	if !near(r.QPS, 16/0.5) || !near(r.EPS, 4/0.5) {
		t.Errorf("at 0.5s: got qps %v, eps %v; want %v, %v", r.QPS, r.EPS, 16/0.5, 4/0.5)
	}
	f.add(load{d: 50 * time.Millisecond}) // within the step: no new sample
	m.Arrive()                            // a call in flight counts
	r = m.Report()
	if !near(r.QPS, 17/0.55) {
		t.Errorf("at 0.55s: got qps %v, want %v (the call in flight counted)", r.QPS, 17/0.55)
	}
	if r.Application != minApplication {
		t.Errorf("got application %v with calls and no slot time, want the floor %v", r.Application, minApplication)
	}
}

func TestWindow(t *testing.T) {
	// Samples a step apart: a report covers the last window, from the
	// newest sample at least window old.
	f := newFake(1, 1)
	m := newMeter(f.source())
	for range 10 { // 1 s busy
		f.add(load{d: step, normal: step, cpu: step})
		m.Report()
	}
	for i := range 10 { // then 1 s idle: the busy second leaves the window
		f.add(load{d: step})
		r := m.Report()
		want := float64(9-i) / 10
		if !near(r.Application, want) || !near(r.CPU, want) {
			t.Errorf("%v into the idle second: got application %v, cpu %v; want %v", time.Duration(i+1)*step, r.Application, r.CPU, want)
		}
	}
	f.mu.Lock()
	before := f.stats
	f.mu.Unlock()
	for range 100 {
		m.Report() // no time passes: no Stats call
	}
	if f.stats != before {
		t.Errorf("got %d Stats calls within one step, want 0", f.stats-before)
	}
	if n := len(m.cur.Load().samples); n > ringSize {
		t.Errorf("got %d samples kept, want at most %d", n, ringSize)
	}
}

func TestSchedulerGone(t *testing.T) {
	// Once the scheduler is gone the last report stands.
	f := newFake(1, 1)
	m := newMeter(f.source())
	f.add(load{d: time.Second, normal: time.Second / 2, cpu: time.Second / 2})
	want := m.Report()
	f.mu.Lock()
	f.gone = true
	f.mu.Unlock()
	f.add(load{d: time.Second})
	if got := m.Report(); got.Application != want.Application || got.CPU != want.CPU {
		t.Errorf("got %+v after the scheduler went, want %+v", got, want)
	}
}

func TestQueueWaitP99(t *testing.T) {
	f := newFake(1, 1)
	m := newMeter(f.source())
	for range 990 {
		m.End(Ran, time.Millisecond)
	}
	for range 10 {
		m.End(Left, 100*time.Millisecond)
	}
	f.add(load{d: time.Second})
	if got := m.Report().QueueWaitP99; got < time.Millisecond || got > 1190*time.Microsecond {
		t.Errorf("990 waits of 1ms, 10 of 100ms: got p99 %v, want 1ms rounded up to a bucket bound", got)
	}
	m.End(Ran, 100*time.Millisecond)
	f.add(load{d: step})
	if got := m.Report().QueueWaitP99; got < 100*time.Millisecond || got > 119*time.Millisecond {
		t.Errorf("one more of 100ms: got p99 %v, want 100ms rounded up", got)
	}
	f.add(load{d: 3 * time.Second}) // the waits leave the window
	if got := m.Report().QueueWaitP99; got != 0 {
		t.Errorf("without calls in the window: got p99 %v, want 0", got)
	}
}

func TestBuckets(t *testing.T) {
	for i := range numBuckets - 1 {
		b := bound(i)
		if got := bucketOf(b); got != i {
			t.Errorf("bucketOf(bound(%d) = %v) = %d, want %d", i, b, got, i)
		}
		if got := bucketOf(b + 1); got != i+1 {
			t.Errorf("bucketOf(bound(%d)+1ns) = %d, want %d", i, got, i+1)
		}
	}
	for _, d := range []time.Duration{-1, 0, time.Microsecond} {
		if got := bucketOf(d); got != 0 {
			t.Errorf("bucketOf(%v) = %d, want 0", d, got)
		}
	}
	if got := bucketOf(math.MaxInt64); got != numBuckets-1 {
		t.Errorf("bucketOf(MaxInt64) = %d, want %d", got, numBuckets-1)
	}
}

func TestCPUBudget(t *testing.T) {
	if b := cpuBudget(); b <= 0 || b > float64(runtime.NumCPU()) {
		t.Errorf("got a budget of %v CPUs, want 0 < budget <= %d", b, runtime.NumCPU())
	}
	t.Setenv("GOMAXPROCS", "1")
	if b := cpuBudget(); b <= 0 || b > 1 {
		t.Errorf("with GOMAXPROCS=1: got %v CPUs, want 0 < budget <= 1", b)
	}
}

func TestProcessCPU(t *testing.T) {
	// Computing raises the process's CPU time. (Wall time would not do: on
	// a busy machine 20ms of computing may get 2ms of CPU.)
	before, ok := processCPU()
	if !ok {
		t.Skip("the process's CPU time is not read on " + runtime.GOOS)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		after, _ := processCPU()
		if after-before >= 10*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after computing for 10s, got %v more CPU time, want at least 10ms", after-before)
		}
	}
}

func TestFor(t *testing.T) {
	// One Meter per scheduler, for as long as it lives (schedmap).
	s1, s2 := schedtest.NewScheduler(t), schedtest.NewScheduler(t)
	if m := For(s1); For(s1) != m || m == For(s2) {
		t.Error("want one Meter per scheduler")
	}
}

// TestQueueUtilization: the utilization of the M/M/1 queue whose mean
// number waiting is given: the inverse of ρ²/(1−ρ), 0 without a queue,
// below 1 however long the queue.
func TestQueueUtilization(t *testing.T) {
	for _, rho := range []float64{0.1, 0.3, 0.5, 0.7, 0.9, 0.99} {
		queued := rho * rho / (1 - rho)
		if got := queueUtilization(queued); math.Abs(got-rho) > 1e-9 {
			t.Errorf("queueUtilization(%v) = %v, want %v", queued, got, rho)
		}
	}
	if got := queueUtilization(0); got != 0 {
		t.Errorf("queueUtilization(0) = %v, want 0", got)
	}
	if got := queueUtilization(1e6); got >= 1 || got < 0.999 {
		t.Errorf("queueUtilization(1e6) = %v, want just below 1", got)
	}
}

func TestThroughScheduler(t *testing.T) {
	// With a real scheduler and the process's CPU: Normal work on the one
	// slot reads as busy as the CPU it got, Idle work not at all, and a
	// slot held by a task that makes no Checkpoint, with two tasks queued
	// behind it, as the overload it is (three per slot) while it runs:
	// Stats counts a running task's slot time so far.
	if testing.Short() {
		t.Skip("computes for 0.6s")
	}
	spin := func(t *testing.T, class cpusched.Class) Report {
		s := schedtest.NewScheduler(t)
		m := For(s)
		schedtest.Compute(t, s, 300*time.Millisecond, cpusched.WithClass(class))
		r := m.Report()
		t.Logf("%v: %+v", class, r)
		return r
	}
	// On a busy machine the work gets less than its slot time of CPU:
	// the busy part is that CPU time, r.CPU x the budget over the one slot.
	if r := spin(t, cpusched.ClassNormal); r.Application < 0.7*min(1, r.CPU*cpuBudget()) {
		t.Errorf("after 0.3s of Normal work on the one slot: got application %v (cpu %v of %v CPUs), want about the CPU it got", r.Application, r.CPU, cpuBudget())
	}
	if r := spin(t, cpusched.ClassIdle); r.Application > 0.3 {
		t.Errorf("after 0.3s of Idle work on the one slot: got application %v (cpu %v), want about 0", r.Application, r.CPU)
	}

	s := schedtest.NewScheduler(t)
	m := For(s)
	hold, release := make(chan struct{}), make(chan struct{})
	holder, err := s.Go(context.Background(), func(*cpusched.Task) error {
		close(hold)
		<-release // holds the slot, computing nothing
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-hold
	var queued []*cpusched.Handle
	for range 2 {
		h, err := s.Go(context.Background(), func(*cpusched.Task) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, h)
	}
	time.Sleep(300 * time.Millisecond)
	r := m.Report()
	close(release)
	for _, h := range append(queued, holder) {
		if err := h.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("a slot held idle, 2 tasks queued: %+v", r)
	if r.Application != 3 {
		t.Errorf("a slot held with no Checkpoint and 2 tasks queued behind it for 0.3s: got application %v, want 3 (tasks per slot)", r.Application)
	}
}
