package cpusched

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// propertyRunsEnv sets how many random cases TestPropertyStatsIdentity
// runs (default 100), and propertySeedEnv replays the one whose seed a
// failure logged.
const (
	propertyRunsEnv = "CPUSCHED_PROPERTY_RUNS"
	propertySeedEnv = "CPUSCHED_PROPERTY_SEED"
)

// TestPropertyStatsIdentity submits random mixes of tasks (errors, panics,
// cancellations, Blocking calls, Checkpoints, classes, groups, nice levels,
// Go and Run, Close with and without a deadline) and checks that every task
// ends exactly once, the Stats identity holds, and nothing leaks (leakcheck
// in TestMain).
//
// The cases are drawn from a seeded generator rather than with a
// property-testing library, which this module cannot require (its tests
// use the standard library only, docs/modules.md); a failing case logs its
// seed, and CPUSCHED_PROPERTY_SEED=S replays it.
func TestPropertyStatsIdentity(t *testing.T) {
	runs := 100
	if testing.Short() {
		runs = 20
	}
	if v, err := strconv.Atoi(os.Getenv(propertyRunsEnv)); err == nil && v > 0 {
		runs = v
	}
	seeds := make([]uint64, runs)
	for i := range seeds {
		seeds[i] = rand.Uint64()
	}
	if v, err := strconv.ParseUint(os.Getenv(propertySeedEnv), 10, 64); err == nil {
		seeds = []uint64{v}
	}
	for _, seed := range seeds {
		if !t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { propertyCase(t, seed) }) {
			t.Fatalf("case failed; replay it with %s=%d", propertySeedEnv, seed)
		}
	}
}

// draws picks a case's random choices.
type draws struct{ r *rand.Rand }

// intRange returns an int in [lo, hi].
func (d draws) intRange(lo, hi int) int { return lo + d.r.IntN(hi-lo+1) }

func pick(d draws, from []string) string { return from[d.intRange(0, len(from)-1)] }

func propertyCase(t *testing.T, seed uint64) {
	d := draws{rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))}
	workers := d.intRange(1, 3)
	mode := testModes()[d.intRange(0, len(testModes())-1)]
	s, err := New(append(mode.opts, WithWorkers(workers), WithSlice(minSlice), WithQueueLimit(d.intRange(1, 64)))...)
	if err != nil {
		t.Fatal(err)
	}
	n := d.intRange(1, 40)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ended := map[int]int{}
	var cancels []context.CancelFunc
	for i := range n {
		kind := pick(d, []string{"ok", "err", "panic", "block", "spin", "cancel"})
		opts := []TaskOption{
			WithClass(Class(d.intRange(0, 3))),
			WithNice(d.intRange(MinNice, MaxNice)),
			WithGroup(pick(d, []string{"", "a", "b"})),
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
		if d.intRange(0, 1) == 1 {
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
	closeCtx, closeCancel := context.WithTimeout(context.Background(), time.Duration(d.intRange(0, 20))*time.Millisecond)
	if d.intRange(0, 1) == 1 {
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
		t.Fatalf("after Close: %+v, want nothing queued or running", st)
	}
	sum := st.Completed + st.Failed + st.Canceled + st.Panicked
	if st.Submitted != sum {
		t.Fatalf("Submitted %d != Completed+Failed+Canceled+Panicked %d (%+v)", st.Submitted, sum, st)
	}
	checkHistograms(t, st)
	for i, c := range ended {
		if c != 1 {
			t.Fatalf("task %d returned %d times", i, c)
		}
	}
	// Every call was either accepted or refused (Run returns ErrClosed
	// both when refused and when Close removed it from the queue, so
	// the split is checked on the counters).
	if uint64(len(ended)) != uint64(n) || st.Submitted+st.Rejected != uint64(n) {
		t.Fatalf("%d of %d calls returned; Submitted %d + Rejected %d, want %d", len(ended), n, st.Submitted, st.Rejected, n)
	}
}
