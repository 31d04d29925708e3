// TestStress: the checks of a round's Stats snapshots, of its calls and of its final Stats.

package cpusched

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// checkStats checks what must hold in any snapshot, and that no counter
// went back since prev.
func (r *stressRound) checkStats(prev Stats) Stats {
	idleReturned := r.idleReturned.Load()
	st := r.s.Stats()
	idleLive := int(r.idleStarted.Load() - idleReturned) // at least those live at the snapshot
	if sum := st.Completed + st.Failed + st.Canceled + st.Panicked + uint64(st.Queued) + uint64(st.Started); st.Submitted != sum {
		r.errorf("Stats: Submitted %d != Completed+Failed+Canceled+Panicked+Queued+Started %d (%s)", st.Submitted, sum, stressStatsString(st))
	}
	// Once Close gives up, parked tasks and tasks back from Blocking get a
	// slot at once to return, even past Workers; so does a task with
	// WithIdleRelease that takes its slot back.
	overbooked := st.Running > st.Workers+idleLive && !r.killable.Load()
	if st.Lent < 0 || st.Lent > max(st.Workers-1, 0) || st.Lends < prev.Lends {
		r.errorf("Stats: Lent %d, Lends %d (before %d), want 0 <= Lent <= Workers-1 (%d) and Lends not going back", st.Lent, st.Lends, prev.Lends, st.Workers-1)
	}
	if st.Workers != r.workers || overbooked || st.Queued < 0 || st.Queued > r.queueLimit || st.Running < 0 || st.Blocked < 0 || st.Running+st.Blocked > st.Started {
		r.errorf("Stats: %s, want Workers %d, Running <= Workers + %d started tasks with WithIdleRelease (until a Close gives up), 0 <= Queued <= %d, Running+Blocked <= Started", stressStatsString(st), r.workers, idleLive, r.queueLimit)
	}
	if st.Submitted < prev.Submitted || st.Completed < prev.Completed || st.Failed < prev.Failed || st.Canceled < prev.Canceled ||
		st.Panicked < prev.Panicked || st.Rejected < prev.Rejected || st.Preempted < prev.Preempted || st.IdleReleases < prev.IdleReleases {
		r.errorf("Stats went back: %s, then %s", stressStatsString(prev), stressStatsString(st))
	}
	if st.RunTime < prev.RunTime || st.CPUTime < prev.CPUTime || st.CPUTimeFallback < prev.CPUTimeFallback ||
		st.CPUTime > st.RunTime || st.CPUTimeFallback > st.CPUTime {
		r.errorf("Stats: RunTime %v, CPUTime %v, CPUTimeFallback %v (before: %v, %v, %v), want none going back and CPUTimeFallback <= CPUTime <= RunTime",
			st.RunTime, st.CPUTime, st.CPUTimeFallback, prev.RunTime, prev.CPUTime, prev.CPUTimeFallback)
	}
	return st
}

func stressStatsString(st Stats) string {
	return fmt.Sprintf("Submitted %d Completed %d Failed %d Canceled %d Panicked %d Rejected %d Queued %d Started %d Running %d Blocked %d Workers %d",
		st.Submitted, st.Completed, st.Failed, st.Canceled, st.Panicked, st.Rejected, st.Queued, st.Started, st.Running, st.Blocked, st.Workers)
}

// check checks every call, then the final Stats against the calls.
func (r *stressRound) check(st Stats, calls []*stressCall) {
	var nils, panics, surelyRejected, maybeRejected uint64
	for _, c := range calls {
		r.checkCall(c)
		err := c.result
		if err == nil && !c.goexited {
			nils++
		}
		var pe *PanicError
		if errors.As(err, &pe) {
			panics++
		}
		switch {
		case c.rejectedByGo, c.badOption, !c.isGo && err == ErrQueueFull:
			surelyRejected++
		case !c.isGo && c.ran == 0 && err == ErrClosed:
			maybeRejected++ // refused, or removed from the queue by Close
		}
	}
	if st.Queued != 0 || st.Started != 0 || st.Running != 0 || st.Blocked != 0 {
		r.errorf("after the final Close: %s, want nothing queued, running or blocked", stressStatsString(st))
	}
	if sum := st.Completed + st.Failed + st.Canceled + st.Panicked; st.Submitted != sum {
		r.errorf("after the final Close: Submitted %d != Completed+Failed+Canceled+Panicked %d", st.Submitted, sum)
	}
	if got := st.Submitted + st.Rejected; got != uint64(len(calls)) {
		r.errorf("Submitted %d + Rejected %d = %d, want the %d calls made", st.Submitted, st.Rejected, got, len(calls))
	}
	if st.Rejected < surelyRejected || st.Rejected > surelyRejected+maybeRejected {
		r.errorf("Rejected = %d, want %d..%d", st.Rejected, surelyRejected, surelyRejected+maybeRejected)
	}
	if st.Completed != nils {
		r.errorf("Completed = %d, want %d (the calls that returned nil)", st.Completed, nils)
	}
	if st.Panicked != panics {
		r.errorf("Panicked = %d, want %d (the calls that returned a *PanicError)", st.Panicked, panics)
	}
	var submitted, waits, runs uint64
	var runTime, cpuTime time.Duration
	for _, c := range st.Classes {
		submitted += c.Submitted
		waits += c.QueueWaits.Count()
		runs += c.RunTimes.Count()
		runTime += c.RunTimes.Sum
		cpuTime += c.CPUTime
	}
	if submitted != st.Submitted || waits != runs || runs > st.Submitted || runTime != st.RunTime {
		r.errorf("classes: Submitted %d, QueueWaits %d, RunTimes %d (sum %v); want Submitted %d, equal counts, RunTime %v",
			submitted, waits, runs, runTime, st.Submitted, st.RunTime)
	}
	groupCPU := st.OtherGroups.CPUTime
	for _, g := range st.Groups {
		groupCPU += g.CPUTime
	}
	if cpuTime != st.CPUTime || groupCPU != st.CPUTime {
		r.errorf("CPUTime %v, summed over the classes %v, over the groups %v; want all equal", st.CPUTime, cpuTime, groupCPU)
	}
}

// checkCall checks that c returned once, with what its fn did.
func (r *stressRound) checkCall(c *stressCall) {
	if n := c.ends.Load(); n != 1 {
		r.errorf("%s returned %d times, want once", c, n)
		return
	}
	if c.ran > 1 {
		r.errorf("%s: fn ran %d times", c, c.ran)
	}
	err := c.result
	var pe *PanicError
	switch {
	case c.late:
		if err != ErrClosed || c.ran != 0 {
			r.errorf("%s, made after Close returned: got %v (fn ran %d times), want ErrClosed", c, err, c.ran)
		}
	case c.badOption:
		if c.ran != 0 || err == nil || !strings.Contains(err.Error(), "cpusched: With") {
			r.errorf("%s with an out-of-range option: got %v (fn ran %d times), want the option's error", c, err, c.ran)
		}
	case c.rejectedByGo:
		if err != ErrQueueFull && (err != ErrClosed || r.closeKind == closeNone) {
			r.errorf("%s: Go refused it with %v, want ErrQueueFull, or ErrClosed once Close began", c, err)
		}
	case c.goexited:
		if !r.inline || c.body != bodyGoexit || c.ran != 1 { // (with mixed, a Run fn may end its goroutine or not)
			r.errorf("%s: Run's goroutine ended in runtime.Goexit (fn ran %d times)", c, c.ran)
		}
	case c.ran == 0:
		switch {
		case err == ErrQueueFull && !c.isGo:
		case err == ErrClosed && r.killable.Load(): // removed by a Close that gave up
		case err == ErrClosed && !c.isGo && r.closeKind != closeNone: // refused
		case err != nil && err == c.ctxErr:
		default:
			r.errorf("%s: fn never ran and the call returned %v (its ctx.Err() was %v), want ErrClosed, ErrQueueFull or the context's error", c, err, c.ctxErr)
		}
	case c.goexit:
		if err != errGoexit || r.inline && !r.mixed && !c.isGo {
			r.errorf("%s: fn called runtime.Goexit and the call returned %v, want errGoexit (from Go, or Run on a worker)", c, err)
		}
	case c.panicked != nil:
		if !errors.As(err, &pe) || pe.Value != c.panicked {
			r.errorf("%s: fn panicked with %v and the call returned %v, want a *PanicError with that value", c, c.panicked, err)
		} else if perr, ok := c.panicked.(error); ok && !errors.Is(err, perr) {
			r.errorf("%s: the *PanicError does not unwrap to the panic's error %v", c, perr)
		}
	default:
		if err != c.returned {
			r.errorf("%s: fn returned %v and the call returned %v", c, c.returned, err)
		}
	}
}
