package cpusched

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPropertyStatsIdentity submits random mixes of tasks (errors, panics,
// cancellations, Blocking calls, Checkpoints, classes, groups, nice levels,
// Go and Run, Close with and without a deadline) and checks that every task
// ends exactly once, the Stats identity holds, and nothing leaks (goleak in
// TestMain).
func TestPropertyStatsIdentity(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		workers := rapid.IntRange(1, 3).Draw(rt, "workers")
		mode := rapid.SampledFrom(testModes()).Draw(rt, "mode")
		s, err := New(append(mode.opts, WithWorkers(workers), WithSlice(minSlice), WithQueueLimit(rapid.IntRange(1, 64).Draw(rt, "limit")))...)
		if err != nil {
			rt.Fatal(err)
		}
		n := rapid.IntRange(1, 40).Draw(rt, "tasks")
		var wg sync.WaitGroup
		var mu sync.Mutex
		ended := map[int]int{}
		var cancels []context.CancelFunc
		for i := range n {
			kind := rapid.SampledFrom([]string{"ok", "err", "panic", "block", "spin", "cancel"}).Draw(rt, fmt.Sprint("kind", i))
			opts := []TaskOption{
				WithClass(Class(rapid.IntRange(0, 3).Draw(rt, fmt.Sprint("class", i)))),
				WithNice(rapid.IntRange(MinNice, MaxNice).Draw(rt, fmt.Sprint("nice", i))),
				WithGroup(rapid.SampledFrom([]string{"", "a", "b"}).Draw(rt, fmt.Sprint("group", i))),
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancels = append(cancels, cancel)
			fn := func(task *Task) error {
				switch kind {
				case "err":
					return errors.New("failed")
				case "panic":
					panic("boom")
				case "block":
					task.Blocking(func() { time.Sleep(100 * time.Microsecond) })
				case "spin", "cancel":
					end := time.Now().Add(2 * time.Millisecond)
					for time.Now().Before(end) {
						if err := task.Checkpoint(); err != nil {
							return err
						}
					}
				}
				return nil
			}
			record := func(err error) {
				mu.Lock()
				ended[i]++
				mu.Unlock()
			}
			if rapid.Bool().Draw(rt, fmt.Sprint("go", i)) {
				h, err := s.Go(ctx, fn, opts...)
				if err != nil {
					record(err)
					continue
				}
				wg.Add(1)
				go func() { defer wg.Done(); record(h.Wait()) }()
			} else {
				wg.Add(1)
				go func() {
					defer wg.Done()
					record(s.Run(ctx, fn, opts...))
				}()
			}
			if kind == "cancel" {
				go cancel()
			}
		}
		closeCtx, closeCancel := context.WithTimeout(context.Background(), time.Duration(rapid.IntRange(0, 20).Draw(rt, "closeAfterMs"))*time.Millisecond)
		if rapid.Bool().Draw(rt, "closeEarly") {
			s.Close(closeCtx)
		}
		wg.Wait()
		s.Close(closeCtx)
		closeCancel()
		for _, c := range cancels {
			c()
		}
		st := s.Stats()
		if st.Queued != 0 || st.Started != 0 || st.Running != 0 || st.Blocked != 0 {
			rt.Fatalf("after Close: %+v, want nothing queued or running", st)
		}
		sum := st.Completed + st.Failed + st.Canceled + st.Panicked
		if st.Submitted != sum {
			rt.Fatalf("Submitted %d != Completed+Failed+Canceled+Panicked %d (%+v)", st.Submitted, sum, st)
		}
		checkHistograms(rt, st)
		for i, c := range ended {
			if c != 1 {
				rt.Fatalf("task %d returned %d times", i, c)
			}
		}
		// Every call was either accepted or refused (Run returns ErrClosed
		// both when refused and when Close removed it from the queue, so
		// the split is checked on the counters).
		if uint64(len(ended)) != uint64(n) || st.Submitted+st.Rejected != uint64(n) {
			rt.Fatalf("%d of %d calls returned; Submitted %d + Rejected %d, want %d", len(ended), n, st.Submitted, st.Rejected, n)
		}
	})
}
