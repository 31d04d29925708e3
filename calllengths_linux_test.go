package cpusched

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
)

// BenchmarkSameGroupCallLengths is the real clock's check of what
// TestSameGroupLongTasksShareByClient checks in the simulation: eight
// closed-loop callers of 200 ms busy loops beside eight of a shorter
// length, none yielding, all in one group of one Scheduler with the
// defaults, for 5 s an iteration. long/short is the long callers' CPU
// time (their threads' clocks, inside fn) over the short callers': 1 is
// sharing by time whatever the calls' lengths. Run it as a container
// runs a service too (docs/performance.md has the command).
func BenchmarkSameGroupCallLengths(b *testing.B) {
	for _, iso := range []Isolation{IsolationOSPriority, IsolationReserve} {
		for _, short := range []time.Duration{20 * time.Millisecond, 10 * time.Millisecond} {
			b.Run(fmt.Sprintf("%s/200ms-%v", iso, short), func(b *testing.B) {
				var ratio float64
				for range b.N {
					ratio += callLengthsRatio(b, iso, 200*time.Millisecond, short, 5*time.Second)
				}
				b.ReportMetric(ratio/float64(b.N), "long/short")
			})
		}
	}
}

// callLengthsRatio runs eight callers of long calls and eight of short
// ones on a new Scheduler with iso for d, and returns the long callers'
// CPU time over the short callers'.
func callLengthsRatio(b *testing.B, iso Isolation, long, short, d time.Duration) float64 {
	s, err := New(WithIsolation(iso))
	if err != nil {
		b.Skip(err)
	}
	defer s.Close(context.Background())
	var cpu [2]atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for k, length := range []time.Duration{long, short} {
		for range 8 {
			wg.Go(func() {
				for ctx.Err() == nil {
					err := s.Run(context.Background(), func(*Task) error {
						runtime.LockOSThread() // the thread's clock is fn's
						defer runtime.UnlockOSThread()
						from := osprio.ThreadCPU()
						for osprio.ThreadCPU()-from < int64(length) {
						}
						cpu[k].Add(osprio.ThreadCPU() - from)
						return nil
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	return float64(cpu[0].Load()) / float64(cpu[1].Load())
}
