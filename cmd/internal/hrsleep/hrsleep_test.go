package hrsleep

import (
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// TestSleepAtLeast checks only the lower bound: how much longer a sleep takes
// depends on the machine's load and belongs in the benchmark below.
func TestSleepAtLeast(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second, 50 * time.Microsecond, 300 * time.Microsecond, Coarse} {
		start := time.Now()
		Sleep(d)
		if got := time.Since(start); got < d {
			t.Errorf("Sleep(%v) returned after %v, want at least %v", d, got, d)
		}
	}
}

// TestSleepHoldsNoThread checks that a precise sleep parks its goroutine
// instead of blocking its thread in a system call: while a sleep sits in
// nanosleep its P is in a system call and the runtime's sysmon thread
// cannot rest (hrsleep_linux.go). Sixteen goroutines sleep at once while
// the test counts, from runtime/metrics, the goroutines outside Go.
func TestSleepHoldsNoThread(t *testing.T) {
	sample := []metrics.Sample{{Name: "/sched/goroutines/not-in-go:goroutines"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		t.Skip("runtime/metrics has no /sched/goroutines/not-in-go")
	}
	base := sample[0].Value.Uint64()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					Sleep(Coarse / 2)
				}
			}
		})
	}
	most := uint64(0)
	for range 50 {
		time.Sleep(time.Millisecond)
		metrics.Read(sample)
		most = max(most, sample[0].Value.Uint64())
	}
	close(stop)
	wg.Wait()
	if most > base+2 {
		t.Errorf("up to %d goroutines outside Go while 16 slept (%d before): the sleep blocks its thread in a system call", most, base)
	}
}

// BenchmarkSleep100us compares the precise sleep with time.Sleep for a 100us
// request; ns/op is the time a sleep really took.
func BenchmarkSleep100us(b *testing.B) {
	b.Run("hrsleep", func(b *testing.B) {
		for b.Loop() {
			Sleep(100 * time.Microsecond)
		}
	})
	b.Run("time.Sleep", func(b *testing.B) {
		for b.Loop() {
			time.Sleep(100 * time.Microsecond)
		}
	})
}
