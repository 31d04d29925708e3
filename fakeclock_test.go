package cpusched

import "sync/atomic"

// fakeClock is a clock that moves only when a test advances it.
type fakeClock struct{ now atomic.Int64 }

func (c *fakeClock) Now() int64      { return c.now.Load() }
func (c *fakeClock) Advance(d int64) { c.now.Add(d) }
func newFakeClock() *fakeClock       { c := &fakeClock{}; c.now.Store(1); return c }

// tick ends the slices that are over, as the monitor would.
func (s *Scheduler) tick() {
	s.mu.Lock()
	s.expireSlicesLocked(s.clock.Now())
	s.mu.Unlock()
}
