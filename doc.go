// Package cpusched schedules a Go program's CPU-heavy work the way Linux
// schedules threads: bounded worker slots, time slices, nice levels,
// classes (realtime, normal, batch, idle), weighted groups, and an
// EEVDF-style policy that picks what runs next, so that latency-sensitive
// goroutines stay fast while CPU-heavy work keeps the cores busy.
//
// The Go runtime is round-robin: a request handler that wakes up waits
// behind every CPU-bound goroutine ahead of it, and a CPU-bound goroutine is
// preempted only after 10 ms. With enough CPU-heavy requests in flight, the
// tail latency of a 1 ms endpoint grows to hundreds of milliseconds. Run the
// CPU-heavy part through a Scheduler and it waits for a worker slot instead,
// in the order the policy chooses, and yields at Checkpoint when its slice
// is over:
//
//	s, err := cpusched.New() // ospriority on Linux, reserve elsewhere
//	if err != nil {
//		return err
//	}
//	defer s.Close(context.Background())
//	err = s.Run(ctx, func(t *cpusched.Task) error {
//		for _, block := range blocks {
//			hash.Write(block)
//			if err := t.Checkpoint(); err != nil { // yields when the slice ends
//				return err
//			}
//		}
//		return nil
//	}, cpusched.WithNice(5))
//
// Costs (go test -bench .; the figures are in docs/performance.md, "Scheduler
// calls"): Checkpoint when nothing is asked of the task, one atomic load;
// with IsolationNone or IsolationReserve, Run of an empty task with a free
// slot, less than a plain goroutine + WaitGroup, and Go + Wait about twice
// as much as the goroutine; with IsolationOSPriority, about a microsecond
// (the task's thread is locked, and lowered only if it runs for 250 us),
// or for the tasks of functions that run long, and everywhere a lowered
// thread cannot be raised back, a hand-off to a hand-off thread
// (microseconds: a few when tasks come back to back, else a futex round
// trip each way); a queued task, a few hundred bytes and no goroutine.
//
// Isolation decides how the rest of the program is protected:
// IsolationOSPriority (the default on Linux) runs tasks on threads lowered
// to the kernel's SCHED_IDLE priority (once a task has run for 250 us)
// with a spare P, so the kernel preempts them whenever another thread of
// the program wakes;
// IsolationReserve (the default elsewhere) runs tasks on fewer slots than
// GOMAXPROCS (cpuworker's approach); IsolationNone on all of them.
//
// Observability, with nothing to switch on: task code runs under the pprof
// labels cpusched_class and cpusched_group (LabelClass, LabelGroup), added
// to those of the context passed to Run or Go, so that
// `go tool pprof -tagfocus cpusched_class=batch` splits a CPU profile by
// class; while runtime/trace is on, each task is a trace task named
// "cpusched.<class>" and each of its slices a "cpusched.run" region (its
// Blocking calls "cpusched.blocking" regions), so `go tool trace` shows when
// tasks ran, waited and yielded (regions nest per goroutine: end the regions
// your task code starts before it calls Checkpoint or Blocking); Stats has counters and queue-wait and
// run-time histograms per class and group (package promsched exports them
// to Prometheus); WithLogger receives the scheduler's own few events.
// Package httpsched runs net/http handlers as tasks, with load shedding.
package cpusched
