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
// Costs (go test -bench .; the figures are in
// docs/performance.md#scheduler-calls): Checkpoint when nothing is asked of
// the task, one atomic load; with IsolationNone or IsolationReserve, Run of
// an empty task with a free slot, less than a plain goroutine + WaitGroup,
// and Go + Wait about twice as much as the goroutine; with
// IsolationOSPriority, about a microsecond (the task's thread is locked,
// and lowered only if it runs for 250 us), or for the tasks of functions
// that run long, and everywhere a lowered thread cannot be raised back or
// the process has one CPU, a
// hand-off to a hand-off thread (microseconds: a few when tasks come back
// to back, else a futex round trip each way); a queued task, a few hundred
// bytes and no goroutine.
//
// Isolation decides how the rest of the program is protected:
// IsolationOSPriority (the default on Linux) runs tasks on threads lowered
// to the kernel's SCHED_IDLE priority (once a task has run for 250 us)
// with a spare P (New raises GOMAXPROCS by one), so the kernel preempts
// them whenever another thread of the program wakes; IsolationReserve (the
// default elsewhere) runs tasks on fewer slots than GOMAXPROCS
// (cpuworker's approach); IsolationNone on all of them.
//
// Observability, with nothing to switch on: task code runs under the pprof
// labels cpusched_class and cpusched_group (LabelClass, LabelGroup), added
// to those of the context passed to Run or Go, so that
// `go tool pprof -tagfocus cpusched_class=batch` splits a CPU profile by
// class; while runtime/trace is on, each task is a trace task named
// "cpusched.<class>" and each of its slices a "cpusched.run" region (its
// Blocking calls "cpusched.blocking" regions), so `go tool trace` shows
// when tasks ran, waited and yielded (regions nest per goroutine: end the
// regions your task code starts before it calls Checkpoint or Blocking);
// Stats has counters and queue-wait and run-time histograms per class and
// group; WithLogger receives the scheduler's own few events.
//
// Adapters: package httpsched runs net/http handlers as tasks, with load
// shedding; promsched exports Stats to Prometheus, and grpcsched runs gRPC
// calls as tasks. promsched and grpcsched are modules of their own
// (go get github.com/cpusched/cpusched/promsched), so that a program that
// uses neither gets no Prometheus or gRPC dependency.
//
// # Work that cannot checkpoint
//
// A task yields only at Checkpoint. In a loop of your own, call it once
// per unit of work that is small against the slice: per row of an image,
// per block of a hash, per chunk of a file.
//
// A call into code with no such loop of yours (image.Decode, png.Encode, a
// compressor, bcrypt) runs to its end without yielding. Meanwhile the task
// holds its worker slot, so the other tasks wait for it whatever their
// class or nice level, and it sees a cancellation (its context's or
// Close's) only when the call returns. What the rest of the program sees
// depends on the mode:
//   - IsolationOSPriority: the task's thread is lowered, so the kernel
//     runs the rest of the program first. The bench's hog-nockpt step
//     (cpusched bench; docs/bench.md) measures this: a 1 ms endpoint's p99
//     stays close to what it is beside the same work in a separate
//     SCHED_IDLE process, and the work keeps nearly all the throughput it
//     has when called directly (docs/performance.md#the-main-job).
//   - IsolationReserve: a P stays free of tasks, so the rest of the
//     program still runs, on the Ps the tasks leave it.
//   - IsolationNone: the rest of the program waits for the Go runtime's
//     own preemption, after 10 ms.
//
// The policy charges such a call as it returns (its CPU time where the
// kernel can say: Stats.CPUTime), so its group waits afterwards while the
// others catch up: the weights hold over spans long against the longest
// call, not within it (docs/design.md#task-scheduling-eevdf-scaled-down
// says what they promise). GroupStats.Overrun estimates how far a
// group's tasks run past their slices. The scheduler keeps that estimate
// per kind of task within the group (a task's function, or WithKind's
// name; httpsched's is the route), and places a new task of a kind that
// overruns as long as it is, so that the group's short tasks of other
// kinds are not taken for it. Where one function runs both (a handler
// whose short lookups and bcrypt calls differ by a parameter), give each
// its WithKind.
//
// Code that reads an io.Reader or writes an io.Writer can still yield:
// wrap the stream so that each call checkpoints first.
//
//	type checkpointWriter struct {
//		t *cpusched.Task
//		w io.Writer
//	}
//
//	func (c checkpointWriter) Write(p []byte) (int, error) {
//		if err := c.t.Checkpoint(); err != nil {
//			return 0, err
//		}
//		return c.w.Write(p)
//	}
//
//	err := png.Encode(checkpointWriter{t, w}, img)
//
// A Reader is the same with Read. The codec decides how much work lies
// between two calls: image.Decode reads in small pieces, while png.Encode
// compresses a whole buffer, milliseconds of work, between writes, so the
// task may yield that much after its slice ends. Work with no stream at
// all, such as bcrypt, needs nothing added: call it as it is inside the
// task. The scheduler sees it at the task's start and end, learns that
// tasks of its kind run past their slices (WithKind), and in between the
// isolation mode keeps the rest of the program running beside it.
//
// Code that waits (a database call, a downstream request, a lock) should
// do so inside Task.Blocking, which gives the slot to another task
// meanwhile. Where it cannot be edited to (handlers run as tasks by a
// wrapper), WithIdleRelease has IsolationOSPriority give the slot up once
// the task's thread has not run for a while, and take one back when it
// computes again: the slice monitor reads the thread's CPU clock, so it
// works only where the task's goroutine is locked to a thread (see its
// doc), and Checkpoint costs nothing more.
package cpusched
