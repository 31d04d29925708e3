package cpusched

// The hand-off: low-priority threads that run the tasks of
// IsolationOSPriority that are not run on their own goroutines.

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
)

// osWorker is one locked low-priority worker goroutine.
//
// The hand-off. Waking a parked worker is the runtime's locked-thread
// dance: the dispatcher readies the worker goroutine on its own P, that P
// is handed to the worker's thread (a futex wake), and when the task ends
// the caller, readied on the worker's P, needs another thread to run on (a
// second wake): 12-28 us for an empty task on this project's machines
// (BenchmarkRunOSPriority). So a worker whose task (or chain of tasks)
// ended within callerSpin spins for up to workerSpin, holding its P,
// before it parks. A task dispatched meanwhile passes through slot with
// two atomic operations, and its Run caller, which then knows the worker
// is awake, spins for up to callerSpin for the end before it blocks on the
// done channel: an empty task costs no wake at all.
//
// Why only after short tasks: a caller that stopped spinning and blocked
// is readied on the worker's P when the task ends, and while the worker
// spins it waits there; in BenchmarkRunOSPriority/serial-100us that added
// 100 us per Run. A task that ended within callerSpin of its start had a
// spinning caller (or, the first time, one that blocked at once because
// the worker was parked: the one stranded wait that starts a run of fast
// hand-offs). After a longer task the worker parks at once, as before.
// Both spins are bounded, so an idle scheduler costs no CPU, and the
// worker's spin is on its low-priority thread, so it uses only a CPU that
// nothing else wants; the caller's spin is at the caller's priority and
// at most callerSpin per Run.
//
// state is workerParked while the worker waits on next, workerSpinning
// while it polls slot, workerClaimed once a dispatcher has taken it from
// the spin (it then stores the task in slot). Only a worker in s.osIdle
// can be claimed, and a dispatcher takes it out of s.osIdle under s.mu
// first, so there is one dispatcher per spin.
type osWorker struct {
	next  chan *Task
	state atomic.Int32
	slot  atomic.Pointer[Task]
}

const (
	workerParked int32 = iota
	workerSpinning
	workerClaimed
)

// workerSpin and callerSpin bound the two spins of the hand-off.
const (
	workerSpin = 50 * time.Microsecond
	callerSpin = 20 * time.Microsecond
)

// stopWorker tells a worker to exit.
var stopWorker = new(Task)

// give hands t (or stopWorker) to w, which the caller has taken out of
// s.osIdle, and reports whether w was spinning (awake).
func (w *osWorker) give(t *Task) (awake bool) {
	if w.state.CompareAndSwap(workerSpinning, workerClaimed) {
		w.slot.Store(t)
		return true
	}
	w.next <- t
	return false
}

// await waits for w's next task, spinning for up to workerSpin, then
// parked on w.next. w is in s.osIdle, in state workerSpinning. A task
// given meanwhile comes through slot; one given after the spin, through
// next.
func (w *osWorker) await() *Task {
	start := time.Now()
	for i := 1; w.state.Load() != workerClaimed; i++ {
		if i%32 == 0 && time.Since(start) >= workerSpin {
			if w.state.CompareAndSwap(workerSpinning, workerParked) {
				return <-w.next
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

// awaitEnd waits for the end of Run task t: when t went to a worker that
// was awake, spinning for up to callerSpin first.
func awaitEnd(t *Task, spin bool) error {
	done := t.handle.done
	if spin {
		start := time.Now()
		for i := 1; ; i++ {
			select {
			case <-done:
				return t.handle.err
			default:
			}
			if i%32 == 0 && time.Since(start) >= callerSpin {
				break
			}
		}
	}
	<-done
	return t.handle.err
}

// spawn starts first-run task t: on a new goroutine, or if t is handed off
// (IsolationOSPriority), on an idle low-priority worker. It reports
// whether that worker was awake (see osWorker).
func (s *Scheduler) spawn(t *Task) (awake bool) {
	if !t.handoff {
		go s.runGo(t)
		return false
	}
	s.mu.Lock()
	if n := len(s.osIdle); n > 0 {
		w := s.osIdle[n-1]
		s.osIdle[n-1] = nil
		s.osIdle = s.osIdle[:n-1]
		s.mu.Unlock()
		return w.give(t)
	}
	s.osWorkers.Add(1)
	s.mu.Unlock()
	go s.osWorkerLoop(t)
	return false
}

// maxIdleOSWorkers bounds the idle pool: enough for every slot to hand off
// without creating a thread.
func (s *Scheduler) maxIdleOSWorkers() int { return s.workers + 1 }

func (s *Scheduler) osWorkerLoop(t *Task) {
	defer s.osWorkers.Done()
	runtime.LockOSThread() // never unlocked, see the file comment
	if err := osprio.Lower(s.cfg.osPolicy); err != nil {
		// New's probe succeeded, so this is unexpected; the task still
		// runs, at normal priority.
		s.log.Warn("cpusched: lowering a worker thread's priority failed; its tasks run at normal priority", "err", err)
	}
	w := &osWorker{next: make(chan *Task, 1)}
	for t != stopWorker {
		start := time.Now()
		s.runGo(t)
		// Spin only after tasks that ended within callerSpin (osWorker).
		spin := time.Since(start) < callerSpin
		s.mu.Lock()
		if s.osStopping || len(s.osIdle) >= s.maxIdleOSWorkers() {
			s.mu.Unlock()
			return
		}
		if spin {
			w.state.Store(workerSpinning)
		} else {
			w.state.Store(workerParked)
		}
		s.osIdle = append(s.osIdle, w)
		s.mu.Unlock()
		if spin {
			t = w.await()
		} else {
			t = <-w.next
		}
	}
}

// stopOSWorkers tells idle workers to exit and waits for all of them.
func (s *Scheduler) stopOSWorkers() {
	if !s.osMode {
		return
	}
	s.mu.Lock()
	s.osStopping = true
	idle := s.osIdle
	s.osIdle = nil
	s.mu.Unlock()
	for _, w := range idle {
		w.give(stopWorker)
	}
	s.osWorkers.Wait()
	s.restoreProcs()
}
