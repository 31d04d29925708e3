package cpusched

// The hand-off threads: a pool of goroutines, each locked for good to its
// thread (handoffLoop), that run the tasks of IsolationOSPriority which do
// not run on their own goroutines (dispatch). A thread lowers itself
// before each task it runs, or raises itself while other processes keep
// the CPUs busy (fitHandoffThread, contention.go).
//
// A task parked at a Checkpoint keeps its hand-off thread blocked, so the
// pool grows past the slot count while tasks are parked; idle threads wait
// for the next task, and the pool keeps at most maxIdleThreads of them.
// Their goroutines never unlock: an unprivileged thread cannot raise its
// priority back, so a goroutine that exits locked takes its thread with
// it. (If that thread is the main one, which the runtime cannot end, the
// runtime parks it for good: one idle thread stays lowered, and runs
// nothing.)

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
)

// handoffThread is one hand-off thread: its goroutine, locked to a lowered
// thread, and how a task reaches it.
//
// Waking a hand-off thread that waits on its channel is the runtime's
// locked-thread dance: the dispatcher readies the goroutine on its own P,
// that P is handed to the goroutine's thread (a futex wake), and when the
// task ends the caller, readied on that P, needs another thread to run on (a
// second wake): tens of microseconds for an empty task
// (docs/measurements/ospriority-settings.md#hand-off). So a hand-off thread
// whose task (or chain of tasks) ended within callerSpin spins for up to
// threadSpin, holding its P, before it waits on its channel. A task
// dispatched meanwhile passes through slot with two atomic operations, and
// its Run caller, which then knows the thread is awake, spins for up to
// callerSpin for the end before it blocks on the done channel: an empty task
// costs no wake at all.
//
// Why only after short tasks: a caller that stopped spinning and blocked
// is readied on the hand-off thread's P when the task ends, and while the
// thread spins the caller waits there, a task's length per Run
// (BenchmarkRunOSPriority/serial-100us). A task that ended within
// callerSpin of its start had a spinning caller (or, the first time, one
// that blocked at once because the thread was waiting: the one stranded
// wait that starts a run of fast hand-offs). After a longer task the
// thread waits on its channel at once. Both spins are bounded, so an idle
// scheduler costs no CPU, and the thread's spin is at its low priority, so
// it uses only a CPU that nothing else wants; the caller's spin is at the
// caller's priority and at most callerSpin per Run.
//
// state is threadWaiting while the thread waits on next, threadSpinning
// while it polls slot, threadClaimed once a dispatcher has taken it from
// the spin (it then stores the task in slot). Only a thread in
// s.os.idleThreads can be claimed, and a dispatcher takes it out of
// s.os.idleThreads under s.mu first, so there is one dispatcher per spin.
//
// tid is the thread's id, for the pins (pin.go) and for startHandoff's
// raise of an idle thread (contention.go). mask, pinnable and pinned are
// the pinned hand-off (pin.go): the thread's CPU mask, read while it ran its
// last task; pinnable, set under s.mu as the thread goes idle, lets a
// dispatcher pin it to the dispatcher's CPU before it sends on next, and
// pinned tells the thread to put its mask back.
type handoffThread struct {
	next  chan *Task
	state atomic.Int32
	slot  atomic.Pointer[Task]

	tid      int32
	mask     osprio.Affinity
	pinnable bool
	pinned   atomic.Bool
}

const (
	threadWaiting int32 = iota
	threadSpinning
	threadClaimed
)

// threadSpin and callerSpin bound the two spins of the hand-off.
const (
	threadSpin = 50 * time.Microsecond
	callerSpin = 20 * time.Microsecond
)

// stopThread tells a hand-off thread to exit.
var stopThread = new(Task)

// give hands t (or stopThread) to w, which the caller has taken out of
// s.os.idleThreads, and reports whether w was spinning (awake). With slice
// pins, w is placed for t's slice; otherwise, with pin (the caller is
// about to leave its CPU), w, if asleep and pinnable, is woken on the
// caller's CPU (pin.go).
func (w *handoffThread) give(s *Scheduler, t *Task, pin bool) (awake bool) {
	if s.os.pins != nil && t != stopThread {
		s.os.pins.place(t, w.tid, placeIf(pin, placeLeave))
		pin = false
	}
	if w.state.CompareAndSwap(threadSpinning, threadClaimed) {
		w.slot.Store(t)
		return true
	}
	if pin && w.pinnable && pinHere(w.tid) {
		w.pinned.Store(true)
	}
	w.next <- t
	return false
}

// wait waits for w's next task on w.next, and puts the thread's mask back
// if give pinned it.
func (w *handoffThread) wait(s *Scheduler) *Task {
	t := <-w.next
	s.yieldWoken()
	if w.pinned.Swap(false) {
		s.unpin(&w.mask)
	}
	return t
}

// await waits for w's next task, spinning for up to threadSpin, then
// parked on w.next. w is in s.os.idleThreads, in state threadSpinning. A task
// given meanwhile comes through slot; one given after the spin, through
// next.
func (w *handoffThread) await(s *Scheduler) *Task {
	start := time.Now()
	for i := 1; w.state.Load() != threadClaimed; i++ {
		if i%32 == 0 && time.Since(start) >= threadSpin {
			if w.state.CompareAndSwap(threadSpinning, threadWaiting) {
				return w.wait(s)
			}
			break // claimed meanwhile: the task is on its way
		}
	}
	for {
		if t := w.slot.Swap(nil); t != nil {
			return t
		}
	}
}

// awaitEnd waits for the end of Run task t: when t went to a hand-off
// thread that was awake, spinning for up to callerSpin first.
func awaitEnd(t *Task, spin bool) error {
	if spin {
		start := time.Now()
		for i := 1; ; i++ {
			if t.handle.ended() {
				return t.handle.err // no channel made
			}
			if i%32 == 0 && time.Since(start) >= callerSpin {
				break
			}
		}
	}
	<-t.handle.Done()
	return t.handle.err
}

// startHandoff starts t, a handed-off task that never ran, on an idle
// hand-off thread or a new one (spawn, through osMode.spawnHandoff). It
// reports whether that thread was awake (see handoffThread).
//
// With pin, the caller is a task's thread about to wait, and an idle
// hand-off thread that is asleep is woken on its CPU (pin.go).
func (s *Scheduler) startHandoff(t *Task, pin bool) (awake bool) {
	s.mu.Lock()
	if n := len(s.os.idleThreads); n > 0 {
		w := s.os.idleThreads[n-1]
		s.os.idleThreads[n-1] = nil
		s.os.idleThreads = s.os.idleThreads[:n-1]
		if s.os.keepNormal.Load() && s.osOwn() {
			// Raised before it wakes: a lowered thread given a P while
			// other processes keep the CPUs busy could hold it for long
			// before it ran to raise itself (contention.go).
			_ = s.os.handoffFrom.RestoreThread(int(w.tid))
		}
		s.mu.Unlock()
		return w.give(s, t, pin)
	}
	s.os.threads.Add(1)
	s.mu.Unlock()
	go s.handoffLoop(t, pin)
	return false
}

// handoffBegin is beginFn's step on a hand-off thread before fn runs: it
// reads the thread's CPU clock for taskCPULocked, fits the thread to the
// scheduler's state (fitHandoffThread), begins the task's turns
// (turns.go) and records the thread for the guard (contention.go). With
// slice pins it returns when fn began, for the placement of the next
// task (pin.go), by the monotonic clock (systemClock, never a test's); 0
// otherwise.
func (s *Scheduler) handoffBegin(t *Task) (start int64) {
	if s.rq.cpuClock {
		t.os.cpuStart = osprio.ThreadCPU() // fn runs on this locked hand-off thread
	}
	if s.fitHandoffThread() {
		s.mu.Lock()
		t.os.raised = true
		s.mu.Unlock()
	}
	t.beginTurns(s.clock.Now()) // turns.go
	t.os.tid.Store(int32(osprio.ThreadID()))
	if s.os.pins != nil {
		start = systemClock{}.Now()
	}
	return start
}

// maxIdleThreads bounds the idle pool: enough for every slot to hand off
// without creating a thread.
func (s *Scheduler) maxIdleThreads() int { return s.workers + 1 }

// handoffLoop is a hand-off thread's goroutine: it locks its thread,
// notes the setting the thread came with (osMode.handoffFrom), runs t and
// then the tasks handed to it (handoffBegin lowers the thread), until it
// is told to stop or the idle pool is full. pin is startHandoff's, for t's
// placement.
func (s *Scheduler) handoffLoop(t *Task, pin bool) {
	defer s.os.threads.Done()
	runtime.LockOSThread() // never unlocked, see the file comment
	if from, err := osprio.Current(); err == nil {
		s.mu.Lock()
		s.os.handoffFrom = from // the runtime's threads all start alike
		s.mu.Unlock()
	}
	w := &handoffThread{next: make(chan *Task, 1), tid: int32(osprio.ThreadID())}
	if s.os.pins != nil {
		defer s.os.pins.forget(w.tid)
		s.os.pins.place(t, w.tid, placeIf(pin, placeSelf)) // a new thread places itself
	}
	for t != stopThread {
		start := time.Now()
		if s.runGo(t).left {
			// The goroutine left its lowered thread, which ended, for a
			// runtime thread it locked (retire.go): it exits unlocked,
			// and the runtime keeps that thread.
			runtime.UnlockOSThread()
			return
		}
		// Spin only after tasks that ended within callerSpin (handoffThread).
		spin := time.Since(start) < callerSpin
		// After a long task, read the mask that a pinned wake puts back;
		// a short one does not pay the system call, and is not pinned.
		// (With slice pins, the table has the mask.)
		pinnable := !spin && s.os.pins == nil && w.mask.ReadAffinity()
		s.mu.Lock()
		w.pinnable = pinnable
		if s.os.threadsStopping || len(s.os.idleThreads) >= s.maxIdleThreads() {
			s.mu.Unlock()
			return
		}
		if spin {
			w.state.Store(threadSpinning)
		} else {
			w.state.Store(threadWaiting)
		}
		s.os.idleThreads = append(s.os.idleThreads, w)
		s.mu.Unlock()
		if spin {
			t = w.await(s)
		} else {
			t = w.wait(s)
		}
		if s.os.pins != nil {
			s.os.pins.woken(w.tid) // a pin for the wake only is put back (pin.go)
		}
	}
}

// stopThreads tells idle hand-off threads to exit and waits for all of
// them, then puts GOMAXPROCS back (osMode.close).
func (s *Scheduler) stopThreads() {
	s.mu.Lock()
	s.os.threadsStopping = true
	idle := s.os.idleThreads
	s.os.idleThreads = nil
	s.mu.Unlock()
	for _, w := range idle {
		w.give(s, stopThread, false)
	}
	s.os.threads.Wait()
	s.os.procs.release()
}
