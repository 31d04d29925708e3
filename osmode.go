package cpusched

// IsolationOSPriority: tasks run on worker goroutines locked to OS threads
// whose kernel priority is lowered, and GOMAXPROCS is raised above the
// worker count, so that goroutines outside the scheduler always find a free
// P and their threads preempt the workers' threads in the kernel the moment
// they wake. No Checkpoint is needed for that protection; Checkpoint still
// orders cpusched's own tasks.
//
// A task parked at a Checkpoint keeps its worker goroutine (and thread)
// blocked, so the workers are a pool that grows past the slot count when
// tasks are parked; idle workers wait for the next task, and the pool keeps
// at most maxIdleOSWorkers of them. Their threads are never unlocked: an
// unprivileged thread cannot raise its priority back, so a worker that
// exits takes its thread with it.

import (
	"log/slog"
	"runtime"
	"sync"

	"github.com/cpusched/cpusched/internal/osprio"
)

// spareProcs is how many Ps IsolationOSPriority adds beyond its workers.
// One: design.md's prototype measured two spare Ps as worse under GC
// (39.7 ms p99 against 12.3 ms with one), since the collector's background
// workers take 25% of GOMAXPROCS.
const spareProcs = 1

// osWorker is one locked low-priority worker goroutine.
type osWorker struct {
	next chan *Task
}

// procsState is the process-wide GOMAXPROCS change, shared by every
// Scheduler in IsolationOSPriority mode: the first one raises it, the last
// one to close restores it.
var procsState struct {
	sync.Mutex
	refs   int
	before int
	raised int
}

// raiseProcs makes GOMAXPROCS at least want, for as long as the returned
// function has not been called. It logs the change, and the restore, to
// logger.
func raiseProcs(want int, logger *slog.Logger) (restore func()) {
	procsState.Lock()
	defer procsState.Unlock()
	if procsState.refs == 0 {
		procsState.before = runtime.GOMAXPROCS(0)
		procsState.raised = procsState.before
	}
	procsState.refs++
	if want > procsState.raised {
		logger.Info("cpusched: IsolationOSPriority raised GOMAXPROCS (restored when the last such Scheduler closes)", "from", procsState.raised, "to", want)
		runtime.GOMAXPROCS(want)
		procsState.raised = want
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			procsState.Lock()
			defer procsState.Unlock()
			procsState.refs--
			if procsState.refs == 0 && procsState.raised != procsState.before {
				logger.Info("cpusched: GOMAXPROCS restored", "from", procsState.raised, "to", procsState.before)
				runtime.GOMAXPROCS(procsState.before)
				procsState.raised = procsState.before
			}
		})
	}
}

// probeOSPriority checks that a thread's priority can be lowered here, on a
// throwaway locked thread.
var probeOSPriority = func(p osprio.Policy) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the runtime discards the thread
		errc <- osprio.Lower(p)
	}()
	return <-errc
}

// spawn starts first-run task t: on a new goroutine, or in OS-priority mode
// on an idle low-priority worker.
func (s *Scheduler) spawn(t *Task) {
	if !s.osMode {
		go s.runGo(t)
		return
	}
	s.mu.Lock()
	if n := len(s.osIdle); n > 0 {
		w := s.osIdle[n-1]
		s.osIdle[n-1] = nil
		s.osIdle = s.osIdle[:n-1]
		s.mu.Unlock()
		w.next <- t
		return
	}
	s.osWorkers.Add(1)
	s.mu.Unlock()
	go s.osWorkerLoop(t)
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
	for t != nil {
		s.runGo(t)
		s.mu.Lock()
		if s.osStopping || len(s.osIdle) >= s.maxIdleOSWorkers() {
			s.mu.Unlock()
			return
		}
		s.osIdle = append(s.osIdle, w)
		s.mu.Unlock()
		t = <-w.next
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
		w.next <- nil
	}
	s.osWorkers.Wait()
	s.restoreProcs()
}
