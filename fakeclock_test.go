package cpusched

import "sync/atomic"

// fakeClock is a clock that moves only when a test advances it.
type fakeClock struct{ now atomic.Int64 }

func (c *fakeClock) Now() int64      { return c.now.Load() }
func (c *fakeClock) Advance(d int64) { c.now.Add(d) }
func newFakeClock() *fakeClock       { c := &fakeClock{}; c.now.Store(1); return c }

// tick ends the slices that are over, and a kept slot whose time is up,
// as the monitor would.
func (s *Scheduler) tick() {
	s.mu.Lock()
	now := s.clock.Now()
	s.expireSlicesLocked(now)
	next, first, _ := s.expireKeptLocked(now)
	s.mu.Unlock()
	if next != nil {
		s.resume(next, first, wakeAny)
	}
}

// keptUntil returns when the kept slot goes to whoever waits, and whether
// a slot is kept.
func (s *Scheduler) keptUntil() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keep.until, s.keep.on
}
