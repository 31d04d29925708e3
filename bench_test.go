package cpusched

// Benchmarks of the per-task cost, each beside its baselines:
//
//	go test -run '^$' -bench . -benchmem
//
// BaselineGoroutine is a plain goroutine + WaitGroup per task, the cost a
// caller pays for "go fn()" and waiting. SharedLockFloor is what Run
// cannot go below while every task passes through one shared state. The
// usual ways to bound concurrency, golang.org/x/sync's semaphore and
// errgroup, are measured beside Run in the libtest module
// (libtest/bench_test.go), since this module requires no module but
// x/sys.

import (
	"context"
	"io"
	"log"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func emptyTask(*Task) error { return nil }

func BenchmarkBaselineGoroutine(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		var wg sync.WaitGroup
		for b.Loop() {
			wg.Add(1)
			go func() { wg.Done() }()
			wg.Wait()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var wg sync.WaitGroup
			for pb.Next() {
				wg.Add(1)
				go func() { wg.Done() }()
				wg.Wait()
			}
		})
	})
}

// BenchmarkSharedLockFloor is the least a Run of an empty task can cost
// while each task's start and end pass through one state that every
// caller shares, as the weights and the accounting need: two clock reads
// and two lock and unlock pairs of one mutex, with nothing between. Run's
// parallel figure is this one plus its own work, which callers on other
// CPUs wait for; against BenchmarkBaselineGoroutine/parallel it says how
// far that figure can come down without a different design.
func BenchmarkSharedLockFloor(b *testing.B) {
	var shared struct {
		mu      sync.Mutex
		started int64
		elapsed int64
	}
	clk := systemClock{}
	run := func() {
		start := clk.Now()
		shared.mu.Lock()
		shared.started++
		shared.mu.Unlock()
		end := clk.Now()
		shared.mu.Lock()
		shared.elapsed += end - start
		shared.mu.Unlock()
	}
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			run()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				run()
			}
		})
	})
}

func benchScheduler(b *testing.B, opts ...Option) *Scheduler {
	s, err := New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// BenchmarkRun is Run of an empty task with a free slot, serial and
// parallel: bare (IsolationNone, the rows docs/performance.md has always
// recorded), then in every mode (IsolationModes), where what a call
// allocates can differ.
func BenchmarkRun(b *testing.B) {
	log.SetOutput(io.Discard) // ospriority's New and Close log the GOMAXPROCS change
	defer log.SetOutput(os.Stderr)
	ctx := context.Background()
	serial := func(opts ...Option) func(*testing.B) {
		return func(b *testing.B) {
			s := benchScheduler(b, opts...)
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Run(ctx, emptyTask); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	parallel := func(opts ...Option) func(*testing.B) {
		return func(b *testing.B) {
			s := benchScheduler(b, opts...)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Run(ctx, emptyTask); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	b.Run("serial", serial(WithIsolation(IsolationNone)))
	b.Run("parallel", parallel(WithIsolation(IsolationNone)))
	for _, m := range IsolationModes() {
		b.Run(m.String()+"/serial", serial(WithIsolation(m)))
		b.Run(m.String()+"/parallel", parallel(WithIsolation(m)))
	}
	b.Run("parallel-1worker", func(b *testing.B) {
		// Every Run but one waits in the queue: the hand-off path.
		s := benchScheduler(b, WithIsolation(IsolationReserve), WithWorkers(1))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.Run(ctx, emptyTask); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

func BenchmarkGoWait(b *testing.B) {
	s := benchScheduler(b, WithIsolation(IsolationNone))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h, err := s.Go(ctx, emptyTask)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

// queuedGoBytes is what a queued Go task allocates, measured as a new user
// would: queuedGoTasks calls of s.Go(ctx, fn) queued behind one busy
// worker (WithWorkers(1)), the runtime.MemStats.TotalAlloc delta over
// their number. opts are added to WithWorkers(1); none is the default
// mode (IsolationOSPriority on Linux).
func queuedGoBytes(tb testing.TB, opts ...Option) float64 {
	tb.Helper()
	const n = queuedGoTasks
	s, err := New(append([]Option{WithWorkers(1)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx := context.Background()
	started, stop := make(chan struct{}), make(chan struct{})
	busy, err := s.Go(ctx, func(*Task) error { close(started); <-stop; return nil })
	if err != nil {
		tb.Fatal(err)
	}
	<-started
	fn := func(*Task) error { return nil }
	handles := make([]*Handle, 0, n)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for range n {
		h, err := s.Go(ctx, fn)
		if err != nil {
			tb.Fatal(err)
		}
		handles = append(handles, h)
	}
	runtime.ReadMemStats(&m1)
	close(stop)
	busy.Wait()
	for _, h := range handles {
		if err := h.Wait(); err != nil {
			tb.Fatal(err)
		}
	}
	return float64(m1.TotalAlloc-m0.TotalAlloc) / n
}

// queuedGoTasks is how many tasks queuedGoBytes queues.
const queuedGoTasks = 20000

// TestQueuedGoBytes pins what a queued Go task allocates in the default
// mode (queuedGoBytes) at 384 bytes: its Task, and no Handle channel until
// someone waits. Allocation bytes do not depend on timing. They are
// counted in whole bytes per task: what a round allocates once (sync.Pool's
// per-P arrays, made again after the GC that starts the round, and the
// runtime's own, a few hundred bytes) is less than one byte per task; the
// least of three rounds leaves out other goroutines' allocations, but for
// what they make in all three: 385.6 bytes in one run beside other
// packages' tests and two busy loops. So up to 4 bytes over pass: any
// change to the task's own allocations moves it by 8 bytes or more (a
// second allocation, or the next size class, 416).
func TestQueuedGoBytes(t *testing.T) {
	log.SetOutput(io.Discard) // New and Close log the GOMAXPROCS change
	defer log.SetOutput(os.Stderr)
	const want = 384
	best := math.Inf(1)
	for range 3 {
		best = min(best, queuedGoBytes(t))
	}
	t.Logf("%.2f bytes per queued task", best)
	if math.Floor(best) > want+4 {
		t.Errorf("a queued Go task allocates %.2f bytes, want at most %d", best, want)
	}
}

// BenchmarkQueuedGo reports queuedGoBytes (B/task) in the default mode
// and in each mode by name; its own B/op is the whole round's.
func BenchmarkQueuedGo(b *testing.B) {
	log.SetOutput(io.Discard)
	defer log.SetOutput(os.Stderr)
	modes := []testMode{{"default", nil}}
	for _, m := range IsolationModes() {
		modes = append(modes, testMode{m.String(), []Option{WithIsolation(m)}})
	}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			var sum float64
			rounds := 0
			for b.Loop() {
				sum += queuedGoBytes(b, m.opts...)
				rounds++
			}
			b.ReportMetric(sum/float64(rounds), "B/task")
		})
	}
}

func BenchmarkCheckpoint(b *testing.B) {
	benchCheckpoints(b, benchScheduler(b, WithIsolation(IsolationReserve), WithWorkers(1)))
}

// benchCheckpoints times Checkpoint in one task of s.
func benchCheckpoints(b *testing.B, s *Scheduler) {
	s.Run(context.Background(), func(t *Task) error {
		b.ResetTimer()
		for b.Loop() {
			if err := t.Checkpoint(); err != nil {
				b.Fatal(err)
			}
		}
		return nil
	})
}

// BenchmarkCheckpointBaseline is the loop without the call, to subtract.
func BenchmarkCheckpointBaseline(b *testing.B) {
	var sink int
	for b.Loop() {
		sink++
	}
	_ = sink
}

// BenchmarkRunOSPriority is Run's hand-off to a low-priority worker thread
// in IsolationOSPriority, against BenchmarkBaselineGoroutine.
// benchSink keeps the benchmarks' computations from being optimized away.
var benchSink uint64

func BenchmarkRunOSPriority(b *testing.B) {
	log.SetOutput(io.Discard) // New and Close log the GOMAXPROCS change
	defer log.SetOutput(os.Stderr)
	ctx := context.Background()
	// A task of 100 us of CPU: its thread is not lowered yet on its own
	// goroutine; in the hand-off its caller stops spinning and blocks, so
	// this is the hand-off with a wake at the end (the 100 us included).
	task100us := func(*Task) error {
		for end := time.Now().Add(100 * time.Microsecond); time.Now().Before(end); {
		}
		return nil
	}
	// A task that makes four short Blocking calls (the lab http server's
	// handler makes one per 64 KiB written).
	blocking := func(t *Task) error {
		for range 4 {
			t.Blocking(func() {})
		}
		return nil
	}
	// A task of about 50 us with a Checkpoint every ~50 ns of work: on its
	// own goroutine its thread is not lowered, and it checks whether to
	// lower it at its Checkpoints (lowerSelf), which must stay cheap.
	denseCheckpoints := func(t *Task) error {
		x := uint64(1)
		for range 1000 {
			for range 40 {
				x = x*6364136223846793005 + 1442695040888963407
			}
			if err := t.Checkpoint(); err != nil {
				return err
			}
		}
		benchSink = x
		return nil
	}
	// A task that computes past osLowerAfter, so that its thread is
	// lowered and put back (on its own goroutine), 2 ms included.
	task2ms := func(*Task) error {
		for end := time.Now().Add(2 * time.Millisecond); time.Now().Before(end); {
		}
		return nil
	}
	serial := func(opts []Option, fn func(*Task) error) func(*testing.B) {
		return func(b *testing.B) {
			s := benchScheduler(b, opts...)
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Run(ctx, fn); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	// parallel runs per callers per P: with 8, tasks wait for a slot.
	parallel := func(opts []Option, fn func(*Task) error, per int) func(*testing.B) {
		return func(b *testing.B) {
			s := benchScheduler(b, opts...)
			b.ReportAllocs()
			b.SetParallelism(per)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Run(ctx, fn); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	for _, d := range []struct {
		name string
		opts []Option
	}{
		{"", []Option{WithIsolation(IsolationOSPriority)}},
		{"-handoff", []Option{WithIsolation(IsolationOSPriority), withOSHandoff()}},
	} {
		b.Run("serial"+d.name, serial(d.opts, emptyTask))
		b.Run("parallel"+d.name, parallel(d.opts, emptyTask, 1))
		b.Run("serial-100us"+d.name, serial(d.opts, task100us))
		b.Run("serial-2ms"+d.name, serial(d.opts, task2ms))
		b.Run("serial-checkpoints"+d.name, serial(d.opts, denseCheckpoints))
		b.Run("parallel-checkpoints"+d.name, parallel(d.opts, denseCheckpoints, 1))
		b.Run("blocking"+d.name, serial(d.opts, blocking))
		b.Run("blocking-contended"+d.name, parallel(d.opts, blocking, 8))
	}
}

// BenchmarkManyTasksTail is a closed loop of 100 callers, each running one
// task after another through the scheduler's few slots, each task 16
// rounds of a 15 us Blocking call, 15 us of CPU and a Checkpoint (the
// shape of `cpusched lab http`'s handler). It reports the tasks' latency
// (Run's call to return) at p50, p99 and max, in ms: a scheduler that lets
// some task wait while newer ones keep passing shows it in max. Every mode,
// and IsolationOSPriority's hand-off to worker threads.
func BenchmarkManyTasksTail(b *testing.B) {
	log.SetOutput(io.Discard)
	defer log.SetOutput(os.Stderr)
	spin := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
	}
	task := func(t *Task) error {
		for range 16 {
			t.Blocking(func() { spin(15 * time.Microsecond) })
			spin(15 * time.Microsecond)
			if err := t.Checkpoint(); err != nil {
				return err
			}
		}
		return nil
	}
	for _, mode := range testModes() {
		b.Run(mode.name, func(b *testing.B) {
			s := benchScheduler(b, mode.opts...)
			const callers = 100
			lat := make([]time.Duration, b.N)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
						start := time.Now()
						if err := s.Run(context.Background(), task); err != nil {
							b.Error(err)
							return
						}
						lat[i] = time.Since(start)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			slices.Sort(lat)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
			b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
		})
	}
}
