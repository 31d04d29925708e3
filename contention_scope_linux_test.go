package cpusched

// The guard's decisions on fake machines laid out as files:
// the guard reads them through the real cpuscope reader, as in
// production, but the process's affinity, its CPU clock and its lowered
// thread's, and time (a fake clock, and no monitor: the test closes every
// window) are the test's.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/cpuscope"
	"github.com/cpusched/cpusched/internal/faketree"
)

// fakeNode is a machine as /proc and cgroup files under root, with the
// clocks the guard reads beside them.
type fakeNode struct {
	t        *testing.T
	root     string
	layout   string
	clk      *fakeClock
	allowed  []int     // the process's affinity
	busy     []float64 // each CPU's busy time so far (ns)
	proc     int64     // the process's CPU time
	thread   int64     // the lowered task thread's CPU time
	delay    int64     // its run delay
	runnable bool      // its state now
	stall    int64     // the time a thread of the process's cgroup waited (ns)
	mates    int64     // the CPU time of the other processes of its quota's cgroup (ns)
	quota    bool      // the guard reads the quota's cgroup (guardSource.quotaGroup)
	tid      int       // the task thread, once known
}

// Layouts: cgroup v1 has a cpu.pressure only at the v2 hierarchy's root,
// the whole machine's, which the guard must not read (it says the machine
// is stalled throughout); cgroup v2 gives the process a cgroup of its own;
// noProc has no files at all.
const (
	cgroupV1 = "cgroup v1"
	cgroupV2 = "cgroup v2"
	noProc   = "no /proc"
)

func newFakeNode(t *testing.T, cpus int, allowed []int, layout string) *fakeNode {
	n := &fakeNode{t: t, root: t.TempDir(), layout: layout, clk: newFakeClock(), allowed: allowed, busy: make([]float64, cpus)}
	for c := range n.busy {
		// The CPUs' ticks fall at different times, as on a machine.
		n.busy[c] = float64(c) * 1e7 / float64(cpus)
	}
	switch layout {
	case cgroupV1:
		n.write("proc/self/cgroup", "3:cpuset:/\n1:cpu:/box\n0::/\n")
		n.write("proc/self/mountinfo", "31 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"+
			"40 30 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n")
	case cgroupV2:
		n.write("proc/self/cgroup", "0::/box\n")
		n.write("proc/self/mountinfo", "25 30 0:23 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
		n.write("sys/fs/cgroup/box/cgroup.events", "populated 1\n")
	}
	return n
}

func (n *fakeNode) write(name, content string) { faketree.Write(n.t, n.root, name, content) }

// writeMachine writes /proc/stat (USER_HZ ticks: busy as user time, the
// rest idle) and the cpu.pressure files from n, as the guard reads them.
func (n *fakeNode) writeMachine() {
	if n.layout == noProc {
		return
	}
	now := float64(n.clk.Now())
	var lines strings.Builder
	sumBusy, sumIdle := int64(0), int64(0)
	for c, busy := range n.busy {
		b, idle := int64(busy/1e7), int64((now-busy)/1e7)
		sumBusy, sumIdle = sumBusy+b, sumIdle+idle
		fmt.Fprintf(&lines, "cpu%d %d 0 0 %d 0 0 0 0 0 0\n", c, b, idle)
	}
	n.write("proc/stat", fmt.Sprintf("cpu  %d 0 0 %d 0 0 0 0 0 0\n%sintr 1 2 3\nctxt 4\n", sumBusy, sumIdle, lines.String()))
	pressure := func(ns int64) string {
		return fmt.Sprintf("some avg10=0.00 avg60=0.00 avg300=0.00 total=%d\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", ns/1000)
	}
	n.write("sys/fs/cgroup/box/cpu.pressure", pressure(n.stall))
	n.write("sys/fs/cgroup/unified/cpu.pressure", pressure(int64(now)))
}

// writeThread writes the task thread's schedstat and stat files from n,
// as the guard reads them.
func (n *fakeNode) writeThread() {
	if n.layout == noProc || n.tid == 0 {
		return
	}
	state := "S"
	if n.runnable {
		state = "R"
	}
	dir := fmt.Sprintf("proc/self/task/%d/", n.tid)
	n.write(dir+"schedstat", fmt.Sprintf("%d %d 1\n", n.thread, n.delay))
	n.write(dir+"stat", fmt.Sprintf("%d (task thread) %s 1 1 1\n", n.tid, state))
}

// source reads n: the files through cpuscope, written as they are read.
func (n *fakeNode) source() guardSource {
	scope := cpuscope.New(n.root)
	src := guardSource{
		processCPU: func() int64 { return n.proc },
		threadCPU:  func(int) int64 { return n.thread },
		threadWait: func(tid int) (int64, bool, bool) {
			n.writeThread()
			return scope.ThreadWait(tid)
		},
		machine: func() (cpuscope.Sample, bool) {
			n.writeMachine()
			return scope.Read(n.allowed)
		},
	}
	if n.quota {
		src.quotaGroup = func() (int64, bool) { return n.proc + n.mates, true }
	}
	return src
}

// scheduler returns an IsolationOSPriority Scheduler with one worker and
// no monitor, whose guard reads n and whose CPU budget is capacity, with
// a task that holds its slot, on a lowered hand-off thread, until the test
// ends.
func (n *fakeNode) scheduler(capacity float64) *Scheduler {
	t := n.t
	needOSPriority(t)
	s, err := New(WithIsolation(IsolationOSPriority), WithWorkers(1), withClock(n.clk), withoutMonitor(), withGuardSource(n.source()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	s.mu.Lock()
	s.os.capacity = capacity
	s.mu.Unlock()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	if _, err := s.Go(context.Background(), func(*Task) error { <-release; return nil }); err != nil {
		t.Fatal(err)
	}
	if !within(5*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.running) == 1 {
			n.tid = int(s.running[0].os.tid.Load())
		}
		return n.tid != 0
	}) {
		t.Fatal("the task did not get a hand-off thread")
	}
	return s
}

// run has load run on n for d, a guard window at a time, the guard
// closing each.
func (n *fakeNode) run(s *Scheduler, load nodeLoad, d time.Duration) {
	for range d / guardWindow {
		w := float64(guardWindow)
		n.clk.Advance(int64(guardWindow))
		for c, share := range load.others {
			n.busy[c] += share * w
		}
		for _, c := range n.allowed {
			n.busy[c] += load.own / float64(len(n.allowed)) * w
		}
		n.proc += int64(load.own * w)
		n.thread += int64(load.thread * w)
		n.delay += int64(load.delay * w)
		n.stall += int64(load.stall * w)
		n.mates += int64(load.mates * w)
		n.runnable = load.runnable
		s.mu.Lock()
		s.guardLocked(n.clk.Now())
		s.mu.Unlock()
	}
}

// nodeLoad is what runs on a fakeNode in each window, as shares of it.
type nodeLoad struct {
	others   map[int]float64 // CPU: the share other processes used
	own      float64         // CPUs the process used, spread over its CPUs
	thread   float64         // the share the lowered task thread got
	runnable bool            // the thread is runnable at each window's end
	delay    float64         // the share added to its run delay
	stall    float64         // the share in which a thread of the cgroup waited
	mates    float64         // CPUs the other processes of the quota's cgroup used (also in others)
}

// cpuRange is the CPUs from lo to hi, for a nodeLoad's others or an
// affinity.
func cpuRange(lo, hi int) []int {
	var cpus []int
	for c := lo; c <= hi; c++ {
		cpus = append(cpus, c)
	}
	return cpus
}

// busyOn returns others that keep each of cpus busy for share of the time.
func busyOn(share float64, cpus ...int) map[int]float64 {
	m := make(map[int]float64, len(cpus))
	for _, c := range cpus {
		m[c] = share
	}
	return m
}

// Loads that recur: a lowered thread starved by others that take every
// CPU from the process; the process alone, its own threads using its
// CPUs and the lowered thread getting its share.
var (
	starvedBy = func(others map[int]float64) nodeLoad {
		return nodeLoad{others: others, runnable: true, stall: 1}
	}
	alone = func(own float64) nodeLoad { return nodeLoad{own: own, thread: 0.5, runnable: true} }
)

type guardPhase struct {
	name          string
	load          nodeLoad
	d             time.Duration
	wantContended bool
}

// TestGuardReadsTheProcessCPUs drives the guard through phases on fake
// machines, one case per way the process's CPUs can be laid out, and
// checks its decision after each phase.
func TestGuardReadsTheProcessCPUs(t *testing.T) {
	tests := []struct {
		name     string
		layout   string
		cpus     int
		allowed  []int
		capacity float64
		quota    bool // the guard reads the quota's cgroup
		phases   []guardPhase
	}{
		{
			name: "cgroup v1, two CPUs", layout: cgroupV1, cpus: 2, allowed: cpuRange(0, 1), capacity: 2,
			phases: []guardPhase{
				{"alone", alone(2), time.Second, false},
				// The task waits on a channel, holding its slot: it gets
				// nothing, but does not wait for a CPU. Before the guard
				// was scoped this turned it contended in ten windows.
				{"a blocked task thread on an idle machine", nodeLoad{own: 0.1}, time.Second, false},
				{"another process takes both CPUs", starvedBy(busyOn(1, 0, 1)), 200 * time.Millisecond, true},
				{"it keeps them", starvedBy(busyOn(1, 0, 1)), 1200 * time.Millisecond, true},
				{"it keeps one, beside the raised threads", nodeLoad{others: busyOn(0.5, 0, 1), own: 1}, 1200 * time.Millisecond, true},
				{"it has gone", alone(2), 2100 * time.Millisecond, false},
			},
		},
		{
			// The last watch of the machine read it quiet: the starved
			// thread alone turns the guard contended, long before the
			// next watch (machineEvery), in which every stop-the-world
			// would wait for that thread.
			name: "a process that begins between two watches", layout: cgroupV1, cpus: 2, allowed: cpuRange(0, 1), capacity: 2,
			phases: []guardPhase{
				{"alone", alone(2), time.Second, false},
				{"another process takes both CPUs", starvedBy(busyOn(1, 0, 1)), time.Duration(longStarvedWindows+1) * guardWindow, true},
			},
		},
		{
			name: "cgroup v2, two CPUs", layout: cgroupV2, cpus: 2, allowed: cpuRange(0, 1), capacity: 2,
			phases: []guardPhase{
				// Others use 1.6 CPUs, over busyLine (1.25), but the
				// process's threads never wait: cpu.pressure does not
				// confirm them. (Under cgroup v1 this is contended.)
				{"others busy beside a task blocked on a channel", nodeLoad{others: busyOn(0.8, 0, 1), own: 0.3}, time.Second, false},
				{"they starve the task's thread", starvedBy(busyOn(1, 0, 1)), 200 * time.Millisecond, true},
				{"they have gone", alone(2), 2100 * time.Millisecond, false},
			},
		},
		{
			name: "the same under cgroup v1", layout: cgroupV1, cpus: 2, allowed: cpuRange(0, 1), capacity: 2,
			phases: []guardPhase{
				{"others busy beside a task blocked on a channel", nodeLoad{others: busyOn(0.8, 0, 1), own: 0.3}, 200 * time.Millisecond, true},
			},
		},
		{
			name: "a cpuset of CPU 0 on two", layout: cgroupV1, cpus: 2, allowed: []int{0}, capacity: 1,
			phases: []guardPhase{
				// The process's own threads fill CPU 0 and its lowered
				// thread waits: the isolation working, whatever runs on
				// CPU 1.
				{"another process busy on CPU 1", nodeLoad{others: busyOn(1, 1), own: 1, runnable: true}, time.Second, false},
				// Under busyLine (0.75 here), but the thread starves
				// whenever the program's own threads stop.
				{"it moves to CPU 0, taking what the program leaves", nodeLoad{others: busyOn(0.5, 0), own: 0.5, runnable: true}, 200 * time.Millisecond, true},
				{"it shares CPU 0 with the raised threads", nodeLoad{others: busyOn(0.5, 0), own: 0.5}, 1200 * time.Millisecond, true},
				{"it goes back to CPU 1", nodeLoad{others: busyOn(1, 1), own: 1}, 2100 * time.Millisecond, false},
				// Others under busyLine but over calmLine (0.25 here):
				// only a thread starved for longStarvedWindows
				// turns the guard contended. One that got almost
				// nothing and is asleep at each window's end is not
				// starved; one that waited for most of each window,
				// then ran briefly and slept, is: its run delay says
				// so.
				{"others at 0.65 of CPU 0, the thread asleep", nodeLoad{others: busyOn(0.65, 0), own: 0.1, thread: 0.01}, time.Second, false},
				{"the same, the thread waiting through each window", nodeLoad{others: busyOn(0.65, 0), own: 0.1, thread: 0.01, delay: 0.9}, 100 * time.Millisecond, true},
			},
		},
		{
			name: "a big node: 4 CPUs of 64, the other 60 busy", layout: cgroupV2, cpus: 64, allowed: cpuRange(60, 63), capacity: 4,
			phases: []guardPhase{
				{"the 4 idle", nodeLoad{others: busyOn(1, cpuRange(0, 59)...)}, time.Second, false},
				{"the process on 2 of them", nodeLoad{others: busyOn(1, cpuRange(0, 59)...), own: 2, thread: 0.9}, 2 * time.Second, false},
				{"others take the 4", starvedBy(busyOn(1, cpuRange(0, 63)...)), 200 * time.Millisecond, true},
			},
		},
		{
			name: "a big node: every CPU of 64 with a quota of 4", layout: cgroupV1, cpus: 64, allowed: cpuRange(0, 63), capacity: 4,
			phases: []guardPhase{
				{"60 busy, the process on 2 of the rest", nodeLoad{others: busyOn(1, cpuRange(0, 59)...), own: 2, thread: 0.9}, 2 * time.Second, false},
				{"63 busy", starvedBy(busyOn(1, cpuRange(0, 62)...)), 200 * time.Millisecond, true},
				{"56 busy", nodeLoad{others: busyOn(1, cpuRange(0, 55)...), own: 3}, 2100 * time.Millisecond, false},
			},
		},
		{
			// A quota of 1 CPU on 2, shared with another process of the
			// cgroup: it takes the budget, not the CPUs (the quota leaves
			// one idle), so only the cgroup's CPU time shows it.
			name: "a 1-CPU quota on 2, shared", layout: cgroupV1, cpus: 2, allowed: cpuRange(0, 1), capacity: 1, quota: true,
			phases: []guardPhase{
				{"alone under its quota", alone(1), time.Second, false},
				{"another process of the cgroup takes most of the quota", nodeLoad{others: busyOn(0.45, 0, 1), mates: 0.9, own: 0.1, runnable: true}, 200 * time.Millisecond, true},
				{"it has gone", alone(1), 2100 * time.Millisecond, false},
				{"it takes a fifth of the quota", nodeLoad{others: busyOn(0.1, 0, 1), mates: 0.2, own: 0.8, thread: 0.3, runnable: true}, 2 * time.Second, false},
			},
		},
		{
			// Nothing to read: the starved thread alone turns it
			// contended, after longStarvedWindows, and it turns quiet
			// after each calm window, to try.
			name: "no /proc", layout: noProc, cpus: 2, allowed: cpuRange(0, 1), capacity: 2,
			phases: []guardPhase{
				{"alone", alone(2), time.Second, false},
				{"the thread starves", starvedBy(nil), 60 * time.Millisecond, true},
				{"the thread runs again: a calm window, to try", alone(2), time.Second, false},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newFakeNode(t, tt.cpus, tt.allowed, tt.layout)
			n.quota = tt.quota
			s := n.scheduler(tt.capacity)
			for _, p := range tt.phases {
				n.run(s, p.load, p.d)
				if got := s.Stats().Contended; got != p.wantContended {
					t.Fatalf("%s: got contended %v, want %v", p.name, got, p.wantContended)
				}
			}
		})
	}
}
