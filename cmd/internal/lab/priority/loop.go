package priority

import (
	"context"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched"
)

// Spin is the fixed CPU loop: n steps of a 64-bit linear congruential
// generator (a multiply and an add that depend on the previous step, so
// the compiler cannot remove or shorten the loop). It contains no function
// call, so with asynchronous preemption off nothing interrupts it. It
// returns the generator's state so the result is used.
func Spin(n uint64, x uint64) uint64 {
	for i := uint64(0); i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// Calibrate returns the loop count that takes about target on this
// machine, measured by timing a short Spin (a few tens of milliseconds of
// the calling thread's CPU time).
func Calibrate(target time.Duration) uint64 {
	const probe = 20_000_000
	// The thread's CPU time, not the wall time, so other processes on a
	// busy machine do not make the loop look slower than it is.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	best := time.Duration(1 << 62)
	for range 3 {
		start, cpu0 := time.Now(), threadCPU()
		sink.Add(Spin(probe, uint64(start.UnixNano())))
		took := threadCPU() - cpu0
		if took <= 0 {
			took = time.Since(start)
		}
		best = min(best, took)
	}
	if best <= 0 {
		best = time.Millisecond
	}
	n := uint64(float64(probe) * float64(target) / float64(best))
	return max(n, 1000)
}

// TaskSpec is one cpusched task of the in-process run.
type TaskSpec struct {
	Name  string
	Class cpusched.Class
	Nice  int
}

// DefaultTasks are the three tasks, in submission order: the normal one
// first, so the others must take the worker from it.
var DefaultTasks = []TaskSpec{
	{Name: "normal", Class: cpusched.ClassNormal},
	{Name: "nice -20", Class: cpusched.ClassNormal, Nice: -20},
	{Name: "ClassRealtime", Class: cpusched.ClassRealtime},
}

// TaskRow is one cpusched task's result. Wall is from the common start to
// its end; CPU is its thread's CPU time in its loop (the task locks its
// goroutine to a thread and reads the thread's CPU clock around each chunk
// between Checkpoints); Share is its CPU time as a part of the time while
// all tasks were still running (until the first one finished); Order is
// its finishing place, 1 first.
type TaskRow struct {
	Name   string        `json:"name"`
	Wall   time.Duration `json:"wall_ns"`
	CPU    time.Duration `json:"cpu_ns"`
	Share  float64       `json:"share_pct"`
	Order  int           `json:"order"`
	Parked uint64        `json:"checkpoints_parked,omitempty"`
}

// TasksResult is the in-process run: the rows and the scheduler's counters.
type TasksResult struct {
	Rows      []TaskRow `json:"rows"`
	Preempted uint64    `json:"preempted"`
	Skipped   string    `json:"skipped,omitempty"`
}

// RunTasks runs specs as cpusched tasks on one worker, submitted together,
// each doing Spin(loops) in chunks of chunk iterations with a Checkpoint
// after each chunk. It returns when all have ended; on failure (a refused
// task, ctx done) it returns the error and no rows.
func RunTasks(ctx context.Context, specs []TaskSpec, loops, chunk uint64) (*TasksResult, error) {
	s, err := cpusched.New(cpusched.WithIsolation(cpusched.IsolationNone), cpusched.WithWorkers(1))
	if err != nil {
		return nil, err
	}
	defer s.Close(context.Background())
	chunk = max(chunk, 1)
	n := len(specs)
	work := make([]atomic.Int64, n)
	ends := make([]time.Time, n)
	var firstDone sync.Once
	var snapshot []int64
	var snapAt time.Time
	start := time.Now()
	handles := make([]*cpusched.Handle, 0, n)
	for i, sp := range specs {
		h, err := s.Go(ctx, func(t *cpusched.Task) error {
			// Locked, so the thread's CPU clock measures this task alone.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			x := uint64(i)
			for done := uint64(0); done < loops; {
				step := min(chunk, loops-done)
				c0 := threadCPU()
				x = Spin(step, x)
				work[i].Add(int64(max(threadCPU()-c0, 0)))
				done += step
				if err := t.Checkpoint(); err != nil {
					return err
				}
			}
			ends[i] = time.Now()
			firstDone.Do(func() {
				snapAt = ends[i]
				snapshot = make([]int64, n)
				for j := range work {
					snapshot[j] = work[j].Load()
				}
			})
			sink.Add(x)
			return nil
		}, cpusched.WithClass(sp.Class), cpusched.WithNice(sp.Nice))
		if err != nil {
			return nil, err
		}
		handles = append(handles, h)
	}
	for _, h := range handles {
		if err := h.Wait(); err != nil {
			return nil, err
		}
	}
	res := &TasksResult{Preempted: s.Stats().Preempted}
	for i, sp := range specs {
		row := TaskRow{Name: sp.Name, Wall: ends[i].Sub(start), CPU: time.Duration(work[i].Load())}
		if d := snapAt.Sub(start); d > 0 {
			row.Share = 100 * float64(snapshot[i]) / float64(d)
		}
		res.Rows = append(res.Rows, row)
	}
	rank(len(res.Rows), func(i int) time.Duration { return res.Rows[i].Wall }, func(i, o int) { res.Rows[i].Order = o })
	return res, nil
}

// sink keeps the loops' results alive.
var sink atomic.Uint64

// rank sets the finishing order (1 first) of n items by their finish time.
func rank(n int, finish func(int) time.Duration, set func(i, order int)) {
	for i := range n {
		o := 1
		for j := range n {
			if finish(j) < finish(i) || (finish(j) == finish(i) && j < i) {
				o++
			}
		}
		set(i, o)
	}
}

func nan() float64 { return math.NaN() }
