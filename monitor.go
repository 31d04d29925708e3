package cpusched

// The slice monitor: the one goroutine New starts, which ends slices while
// tasks wait, and in IsolationOSPriority lowers long tasks' threads and
// samples the rest of the program's use of Ps for lending (lend.go).

import (
	"math"
	"time"
)

// watchLocked makes sure the monitor watches slices while tasks wait.
func (s *Scheduler) watchLocked() {
	if s.watching || s.monitorKick == nil {
		return
	}
	s.watching = true
	s.kickMonitor()
}

// kickMonitor makes the monitor look at the running tasks again.
func (s *Scheduler) kickMonitor() {
	if s.monitorKick == nil {
		return
	}
	select {
	case s.monitorKick <- struct{}{}:
	default:
	}
}

// monitor ends slices. It sleeps until a task waits for a slot (watchLocked
// wakes it), then, while tasks wait, wakes at the earliest end of a running
// task's slice and sets that task's preempt bit. An idle scheduler, or one
// whose tasks all have slots, costs no CPU here. In IsolationOSPriority
// with tasks on their own goroutines it also lowers the threads of tasks
// that have computed for osLowerAfter (lowerLongLocked), waking at most
// every osLowerAfter while tasks run, and until lowerIdle after the last
// start. Its timer runs late while the P that set it runs a task, so tasks
// also check for themselves at their Checkpoints (lowerSelf); the monitor
// is what lowers a task that makes none. In IsolationOSPriority it also
// wakes every lendTick while tasks run or wait, to sample for lending
// (lendLocked), runs the guard, which closes a window every guardWindow
// (guardLocked), and starts the tasks a slot given back lets run: the
// mode's part of each pass is osMode.monitorLocked; after it, outside
// s.mu, the short kernel slices while contended (osMode.tendSlices).
func (s *Scheduler) monitor() {
	defer close(s.monitorDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-s.monitorStop:
			return
		case <-s.monitorKick:
		}
		for {
			s.mu.Lock()
			now := s.clock.Now()
			slices := s.rq.nwaiting > 0 && len(s.running) > 0
			var next int64 = math.MaxInt64
			if slices {
				next = s.expireSlicesLocked(now)
			}
			kt, kfirst, kwait := s.expireKeptLocked(now)
			next = min(next, kwait)
			d, look, started := s.os.monitorLocked(now)
			next = min(next, d)
			if !slices && !look && !s.keep.on {
				s.watching = false
				s.mu.Unlock()
				if kt != nil {
					s.resume(kt, kfirst, wakeAny)
				}
				s.os.tendSlices(now) // the guard may have turned quiet in this pass
				break
			}
			s.mu.Unlock()
			if kt != nil {
				s.resume(kt, kfirst, wakeAny)
			}
			for _, st := range started {
				s.resume(st.t, st.first, wakeAny)
			}
			s.os.tendSlices(now)
			timer.Reset(time.Duration(next))
			select {
			case <-s.monitorStop:
				timer.Stop()
				return
			case <-timer.C:
			case <-s.monitorKick:
				timer.Stop()
			}
		}
	}
}

// expireSlicesLocked flags the running tasks whose slice has ended and returns
// the time until the next one ends (at most one slice).
func (s *Scheduler) expireSlicesLocked(now int64) (next int64) {
	next = int64(s.cfg.slice)
	for _, t := range s.running {
		if t.sliceEnd <= now {
			t.preempt.Or(preemptSlice)
		} else if d := t.sliceEnd - now; d < next {
			next = d
		}
	}
	return next
}
