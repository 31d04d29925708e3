package cpusched

// Pinned hand-offs and slice pins: in IsolationOSPriority, a task that
// gives its slot to a parked task at a Checkpoint wakes the next task's
// thread on the CPU it is about to leave, and where the slots cover every
// CPU the process may use, each running task's thread keeps a CPU of its
// own for its slice.
//
// The hand-off. Both are lowered threads, the yielding one about to sleep
// and the next one asleep. Woken without a hint, the next thread is placed
// by the kernel's wake-up rules, which count a CPU that runs only SCHED_IDLE
// threads as idle: it was often queued behind the other slot's task, where
// SCHED_IDLE threads take turns by the kernel's slice of milliseconds, while
// the CPU the yielding thread left ran nothing, and the P the runtime had
// handed to the woken thread (with the goroutines and timers queued on it)
// waited with it
// (docs/measurements/ospriority-settings.md#pinned-hand-offs). So the
// yielding thread pins the next thread to its own CPU (placeWoken, for
// resume's wakeYield), and the woken thread puts its own mask back as
// soon as it runs (unparkThread; handoffThread.wait for an idle hand-off
// thread), before anything else: two system calls per hand-off, at most
// one hand-off per slice and slot.
//
// Where slice pins place the hand-off threads (below), this pin is left to
// a task's own goroutine waiting on its lowered thread; so it runs for
// every thread where the CPUs outnumber the slots. There, measured again
// at 5b64dc9 (bench -modes floor,ospriority:1 -steps hog-sched,io-heavy
// on 2 CPUs, six alternating pairs with a build without it,
// 2026-12-03 11:52-12:16 UTC), io-heavy's hog ran at 83-95% of the
// floor's passes with it and 71-94% without, ahead in every pair (by 1
// to 12 points), with io-heavy's p99 lower in five of six; hog-sched's
// p99 (0.98-1.67x the floor against 0.67-1.44x) and passes/s did not
// move beyond the noise.
//
// Only a thread that waits locked is pinned: a hand-off thread, or a task's
// own goroutine on its lowered thread. A parked task's waitTid is its
// thread's id while it waits, negated by the pin to tell it to restore
// (one field of Task.os: a Task stays in its size class,
// TestQueuedTaskMemory). A parked task is woken once, by whoever gave it
// a slot (or by its cancellation, which does not pin), so a pin cannot
// outlive the wake.
//
// Slice pins (cpuTable). Where the process may use no more CPUs than there
// are slots, and every slot is taken, the hand-off threads of the running
// long tasks hold one CPU each (on this project's 2-CPU machine, two slots).
// Unpinned, a running task's thread that a normal thread preempted waits on
// that CPU, or the kernel's load balancer moves it behind the other slot's
// task, and a CPU whose normal thread then sleeps runs nothing: the kernel
// does not pull a thread that ran within its migration cost (half a
// millisecond) over to an idle CPU, and with tasks on every slot the CPUs
// stayed partly idle (docs/measurements/ospriority-settings.md#slice-pins).
// So a long task's hand-off thread is pinned for its slice: the thread that
// wakes it places it (place), on the CPU the waker leaves (a yield, a long
// task's end) or a free one. The woken thread keeps the pin; its next
// placement re-pins it or puts its mask back, so an idle thread's stale pin
// costs nothing. When a slot is left empty (a task ended with none queued, a
// lent slot, a Blocking call), every pin is put back at once (drop), so that
// the kernel spreads fewer tasks than CPUs as it would, and a Checkpoint's
// hand-off pins for the wake only, as above. Short tasks are not pinned: for
// them the system calls cost more than the kernel's placement. Where the
// CPUs outnumber the slots (a container with a CPU quota on a larger
// machine) a pinned thread could wait on a busy CPU while others idle, so
// there are no slice pins. Tasks on their own goroutines (lowering.go) are
// never slice-pinned: their threads go back to the program's goroutines.

import (
	"sync"

	"github.com/cpusched/cpusched/internal/osprio"
)

// placeWoken is resume's step before it wakes next, a parked task given a
// slot (osMode.waking). At a Checkpoint's hand-off (wakeYield) the thread
// next waits on is pinned to this thread's CPU, which the caller is about
// to leave; with slice pins, a hand-off thread is placed for its slice
// instead (cpuTable.place), pinned there where the caller's task ran long
// (wakeYield, wakeLeave).
func (s *Scheduler) placeWoken(next *Task, hint wakeHint) {
	tid := next.os.waitTid.Load()
	if tid <= 0 {
		return // not waiting locked, or not yet
	}
	if s.os.pins != nil && next.os.handoff {
		s.os.pins.place(next, tid, placeIf(hint != wakeAny, placeLeave))
		next.os.waitTid.Store(-tid) // placed
		return
	}
	if hint == wakeYield && pinHere(tid) {
		next.os.waitTid.Store(-tid)
	}
}

// pinHere pins thread tid to the calling thread's CPU and reports whether
// it did.
func pinHere(tid int32) bool {
	cpu := osprio.CPU()
	return cpu >= 0 && osprio.PinThread(int(tid), cpu) == nil
}

// unpin is a pinned thread's first step once woken: it puts back mask, the
// mask the thread read before it waited.
func (s *Scheduler) unpin(mask *osprio.Affinity) {
	s.cfg.hooks.pinnedWake()
	if err := mask.Restore(); err != nil {
		// Unexpected (the mask was the thread's own); the thread stays
		// on one CPU until its next pinned wake.
		s.log.Warn("cpusched: putting a thread's CPU mask back after a hand-off failed", "err", err)
	}
}

// parkThread is waitForSlot's step before t's goroutine waits on t.wake
// for its slot back (osMode.park). A task on its own goroutine whose
// thread is not lowered waits unlocked (unlockThreadToWait), and one that
// left its hand-off thread waits locked to the runtime thread it landed
// on (lockLanded), which is not pinned; one that
// waits locked to a lowered thread makes itself pinnable: with slice
// pins, a hand-off thread's waker places it (cpuTable); otherwise its mask
// is read first, to be put back after the wake if a hand-off pinned it.
func (s *Scheduler) parkThread(t *Task, p *osPark) {
	p.unlocked = s.unlockThreadToWait(t)
	if p.unlocked || t.os.left() {
		return
	}
	p.locked = true
	if s.os.pins != nil && t.os.handoff {
		p.placed, p.tid = true, int32(osprio.ThreadID())
		t.os.waitTid.Store(p.tid)
		return
	}
	if p.masked = p.mask.ReadAffinity(); p.masked {
		t.os.waitTid.Store(int32(osprio.ThreadID()))
	}
}

// unparkThread is waitForSlot's step once t's goroutine has its slot
// back (osMode.unpark), parkThread's undo. A thread that waited locked
// puts back the mask a hand-off pinned (or, with slice pins, places
// itself where its waker did not: it woke before it was pinnable, or a
// cancellation woke it), yields its CPU once (yieldWoken), and leaves the
// thread if it must (retire.go). Then, as any task back on its slot, the
// time its goroutine took to run counts as not computing (noteWake), and
// an unlocked goroutine is locked to its thread again (lockThread).
func (s *Scheduler) unparkThread(t *Task, p *osPark) {
	if p.locked {
		switch {
		case p.placed:
			if t.os.waitTid.Swap(0) > 0 {
				s.os.pins.place(t, p.tid, placeSelf)
			} else {
				s.os.pins.woken(p.tid)
			}
		case p.masked:
			if t.os.waitTid.Swap(0) < 0 {
				s.unpin(&p.mask)
			}
		}
		s.yieldWoken()
		s.os.mayLeave(t) // contended while it waited
	}
	s.noteWake(t)
	if p.unlocked {
		s.lockThread(t, false)
	}
}

// cpuTable is the slice pins' state (see the file comment): which running
// task's hand-off thread has each of the process's CPUs, whether it is
// pinned there, and which threads are still pinned from a slice they left.
type cpuTable struct {
	mask osprio.Affinity // the process's CPUs, as New found them
	cpus []int

	mu      sync.Mutex
	running int // slots taken, as s.running has it
	holders []cpuHolder
	stale   map[int32]struct{} // pinned threads that have no CPU
	wake    map[int32]struct{} // threads pinned for their wake only (woken)
}

// cpuHolder is a running task whose hand-off thread has a CPU, pinned
// there while every slot is taken.
type cpuHolder struct {
	t      *Task
	tid    int32
	pinned bool
}

// newCPUTable returns the slice pins' table for a scheduler of the given
// worker slots, or nil where there are to be no slice pins: the process's
// CPUs (the calling thread's mask) outnumber the slots, or there is one.
func newCPUTable(workers int) *cpuTable {
	c := &cpuTable{stale: make(map[int32]struct{}), wake: make(map[int32]struct{})}
	if !c.mask.ReadAffinity() {
		return nil
	}
	c.cpus = c.mask.CPUs()
	if len(c.cpus) < 2 || len(c.cpus) > workers {
		return nil
	}
	c.holders = make([]cpuHolder, len(c.cpus))
	return c
}

// started records that a task took a slot, n now taken; s.mu is held.
func (c *cpuTable) started(n int) {
	c.mu.Lock()
	c.running = n
	c.mu.Unlock()
}

// left records that t left its slot, n now taken; s.mu is held. Its
// thread, if pinned, stays pinned, so that its CPU goes to the next task
// placed from this thread (a Checkpoint's hand-off, a task's end).
func (c *cpuTable) left(t *Task, n int) {
	c.mu.Lock()
	c.running = n
	for i, h := range c.holders {
		if h.t == t {
			if h.pinned {
				c.stale[h.tid] = struct{}{}
			}
			c.holders[i] = cpuHolder{}
		}
	}
	c.mu.Unlock()
}

// pinTo is a change of one thread's mask that place or drop decided.
type pinTo struct {
	tid int32
	cpu int // -1: the process's mask
}

// placeHow is who places a thread and why (cpuTable.place).
type placeHow int8

const (
	// placeOther: the thread is woken for a task that is new or after a
	// short one (submit, a short task's end, the monitor, a cancellation):
	// no pin, for short tasks the system calls cost more than the
	// kernel's placement.
	placeOther placeHow = iota
	// placeLeave: the caller is a long task's thread that leaves its CPU
	// to the woken thread (a Checkpoint's hand-off, the end of a task that
	// ran past callerSpin).
	placeLeave
	// placeSelf: the thread places itself to go on with long work (its
	// own next task after a long one, or a wake that was not placed).
	placeSelf
)

// placeIf is how where the caller's task ran long (pin), else placeOther.
func placeIf(pin bool, how placeHow) placeHow {
	if pin {
		return how
	}
	return placeOther
}

// place gives the hand-off thread tid, about to run task t, a CPU for t's
// slice: the calling thread's if nobody has it, or another that nobody
// has. Placed by placeLeave or placeSelf while every slot is taken, the
// thread is pinned there, and so are the other holders not pinned yet.
// With a slot empty, placeLeave pins it to the caller's CPU for its wake
// only, as without slice pins (woken puts its mask back). A mask that a
// slice left pinned is put back where the thread is not pinned anew.
func (c *cpuTable) place(t *Task, tid int32, how placeHow) {
	here := -1
	if how != placeOther {
		here = osprio.CPU() // a system call: only where it may pin
	}
	c.mu.Lock()
	i := -1
	for j, h := range c.holders {
		if h.t == t {
			c.holders[j] = cpuHolder{} // cannot happen: a waking thread has none
		}
		if h.t == nil && (i < 0 || c.cpus[j] == here) {
			i = j
		}
	}
	full := c.running >= len(c.cpus)
	_, stale := c.stale[tid]
	delete(c.stale, tid)
	var pins []pinTo
	switch {
	case i >= 0 && full && how != placeOther:
		c.holders[i] = cpuHolder{t: t, tid: tid, pinned: true}
		pins = append(pins, pinTo{tid, c.cpus[i]})
		for j, h := range c.holders {
			if h.t != nil && !h.pinned {
				c.holders[j].pinned = true
				pins = append(pins, pinTo{h.tid, c.cpus[j]})
			}
		}
	default:
		if i >= 0 {
			c.holders[i] = cpuHolder{t: t, tid: tid}
		}
		switch {
		case how == placeLeave && !full && here >= 0:
			c.wake[tid] = struct{}{}
			pins = append(pins, pinTo{tid, here})
		case stale:
			pins = append(pins, pinTo{tid, -1})
		}
	}
	c.mu.Unlock()
	c.apply(pins)
}

// woken is a placed thread's first step once woken: if it was pinned for
// its wake only, it puts its mask back.
func (c *cpuTable) woken(tid int32) {
	c.mu.Lock()
	_, ok := c.wake[tid]
	delete(c.wake, tid)
	c.mu.Unlock()
	if ok {
		_ = c.mask.Restore() // failing, the thread stays pinned until its next placement
	}
}

// drop puts back the mask of every pinned holder once a slot is left
// empty (the caller left one; another task may have taken it meanwhile),
// so that the kernel places fewer tasks than CPUs where it likes. Threads
// pinned from an earlier slice are put back as they are next placed.
func (c *cpuTable) drop() {
	c.mu.Lock()
	var pins []pinTo
	if c.running < len(c.cpus) {
		for i, h := range c.holders {
			if h.pinned {
				c.holders[i].pinned = false
				pins = append(pins, pinTo{h.tid, -1})
			}
		}
	}
	c.mu.Unlock()
	c.apply(pins)
}

// apply makes the mask changes in pins. One that fails (the thread exited
// meanwhile, or a kernel that refuses) leaves that thread as it was: a
// pin is a placement hint, never needed for correctness.
func (c *cpuTable) apply(pins []pinTo) {
	for _, p := range pins {
		if p.cpu >= 0 {
			_ = osprio.PinThread(int(p.tid), p.cpu)
		} else {
			_ = c.mask.SetThread(int(p.tid))
		}
	}
}

// forget drops thread tid, which is exiting, from the table.
func (c *cpuTable) forget(tid int32) {
	c.mu.Lock()
	delete(c.stale, tid)
	delete(c.wake, tid)
	c.mu.Unlock()
}
