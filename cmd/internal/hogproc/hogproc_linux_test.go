package hogproc

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestChildThreadsAreSchedIdle: once the hog runs, every thread of the
// child, and so every thread that is doing its work, is SCHED_IDLE, by
// sched_getattr (CheckThreads) and by the policy field of each thread's
// /proc stat; it does work while running and none while paused.
//
// The hog runs only in the kernel's small share for idle threads while
// other processes keep the CPUs busy, so the test waits for its work (up
// to replyTimeout) rather than for a fixed time, and after the pause
// allows each goroutine the pass it was in, however long that takes.
func TestChildThreadsAreSchedIdle(t *testing.T) {
	const goroutines = 4
	p, err := startChild(t, "ok", "-c", strconv.Itoa(goroutines))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if p.Threads() < 1 {
		t.Errorf("got %d threads lowered, want >= 1", p.Threads())
	}
	ctx := context.Background()
	before, err := p.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	var running Count
	var stats []threadStat
	for deadline := time.Now().Add(replyTimeout); ; time.Sleep(100 * time.Millisecond) {
		if running, err = p.Count(ctx); err != nil {
			t.Fatal(err)
		}
		stats = threadStats(t, p.PID())
		if running.Passes > before.Passes && slices.ContainsFunc(stats, func(th threadStat) bool { return th.cpuTicks > 0 }) ||
			time.Now().After(deadline) {
			break
		}
	}
	if !running.Running || running.PassesPerSecondSince(before) <= 0 {
		t.Errorf("got %+v after %+v, want passes done while running", running, before)
	}
	n, err := CheckThreads(p.PID())
	if err != nil || n < 1 {
		t.Errorf("CheckThreads: got %d threads, %v; want all SCHED_IDLE", n, err)
	}
	busy := 0
	for _, th := range stats {
		if th.cpuTicks == 0 {
			continue
		}
		busy++
		if th.policy != 5 {
			t.Errorf("thread %d used %d ticks of CPU with policy %d, want SCHED_IDLE (5)", th.tid, th.cpuTicks, th.policy)
		}
	}
	if busy == 0 {
		t.Errorf("no thread of the hog used CPU")
	}

	paused, err := p.Pause(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	b, err := p.Count(ctx)
	if err != nil || b.Running || b.Passes-paused.Passes > goroutines {
		t.Errorf("paused: got %+v then %+v (%v), want at most the %d passes in progress", paused, b, err, goroutines)
	}
	if _, err := p.ask(ctx, "jump"); err == nil || !strings.Contains(err.Error(), `unknown command "jump"`) {
		t.Errorf("got %v, want the unknown command named", err)
	}
	if _, err := p.Count(ctx); err != nil {
		t.Errorf("after an unknown command: %v, want the conversation to go on", err)
	}
}

// TestNeighborStaysAtNormalPriority: the neighbour lowers nothing, its
// busy threads are SCHED_OTHER (0), and it works only while running.
func TestNeighborStaysAtNormalPriority(t *testing.T) {
	p, err := startChild(t, "neighbor", "-c", "2")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if p.Threads() != 0 {
		t.Errorf("got %d threads lowered, want 0", p.Threads())
	}
	ctx := context.Background()
	before, err := p.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	running, err := p.Pause(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if running.PassesPerSecondSince(before) <= 0 {
		t.Errorf("got %+v after %+v, want passes done while running", running, before)
	}
	busy := 0
	for _, th := range threadStats(t, p.PID()) {
		if th.cpuTicks == 0 {
			continue
		}
		busy++
		if th.policy != 0 {
			t.Errorf("thread %d used %d ticks of CPU with policy %d, want SCHED_OTHER (0)", th.tid, th.cpuTicks, th.policy)
		}
	}
	if busy == 0 {
		t.Errorf("no thread of the neighbour used CPU")
	}
}

// threadStat is what /proc/PID/task/TID/stat says of a thread.
type threadStat struct {
	tid      int
	cpuTicks int // utime + stime
	policy   int
}

// threadStats reads the stat file of every thread of pid.
func threadStats(t *testing.T, pid int) []threadStat {
	t.Helper()
	tids, err := threadIDs(strconv.Itoa(pid))
	if err != nil {
		t.Fatal(err)
	}
	var stats []threadStat
	for _, tid := range tids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
		if err != nil {
			continue // exited
		}
		// The fields after "(comm) ", from field 3 (state) on.
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
		utime, _ := strconv.Atoi(f[14-3])
		stime, _ := strconv.Atoi(f[15-3])
		policy, err := strconv.Atoi(f[41-3])
		if err != nil {
			t.Fatalf("thread %d: policy field %q: %v", tid, f[41-3], err)
		}
		stats = append(stats, threadStat{tid: tid, cpuTicks: utime + stime, policy: policy})
	}
	return stats
}

// TestCheckThreadsFindsANormalThread: the test process's own threads are
// not SCHED_IDLE, and CheckThreads says which.
func TestCheckThreadsFindsANormalThread(t *testing.T) {
	_, err := CheckThreads(os.Getpid())
	if err == nil || !strings.Contains(err.Error(), "not SCHED_IDLE (5)") {
		t.Errorf("got %v, want a thread named that is not SCHED_IDLE", err)
	}
}
