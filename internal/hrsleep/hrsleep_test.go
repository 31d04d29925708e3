package hrsleep

import (
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
