package cpusched

// The dispatch: which tasks of IsolationOSPriority run on their own
// goroutines and which are handed off, by the table of task lengths.

// dispatch returns whether t, a new task, is handed off to a hand-off
// thread (admit): always where tasks cannot run on their own goroutines,
// never while contended, and otherwise when the recent tasks of its kind
// (kind.go: its function's, or WithKind's; or a kind sharing its slot)
// were long.
//
// Why long tasks are handed off. A task on its own goroutine starts on
// whatever runtime thread ran its caller, often the one that just took a
// request off the network poller, and that thread is then lowered and held
// for the task's length; a hand-off thread only ever runs tasks. With long
// tasks on their own goroutines, examples/httpserver's fast route had about
// twice the p99 it had with the hand-off, even with each thread lowered as
// its task began, or with each task on a new goroutine
// (docs/measurements/ospriority-settings.md#own-goroutines). For a long task
// the hand-off costs a negligible part of its length; for short ones it is
// the whole cost. So a kind's tasks run on their own goroutines until
// they turn out long, and go back to them once they are short again.
func (m *osMode) dispatch(t *Task) (handoff bool) {
	if m.keepNormal.Load() {
		// No task goes to a lowered thread while other processes keep the
		// CPUs busy (contention.go).
		return false
	}
	if !m.own {
		return true
	}
	return m.lengths[t.ent.kind].Load() >= longScore
}

// The table of task lengths: a moving score per kind slot, 0 (short) to
// 1024 (long), that each ended task moves a quarter of the way toward its
// own length; a kind whose score is at least longScore is handed off.
// From either end, three tasks of the other length flip it. Updates are
// not atomic as a whole: a lost one costs one dispatch choice.
const longScore = 512

// noteLength adds t, which is ending, to the table of task lengths. A task
// on its own goroutine was long if the monitor lowered its thread (it had
// computed for osLowerAfter); one handed off, if it held its slot that
// long, not counting the time it did not compute, and its hand-off thread
// computed that long too (cpu, from taskCPULocked: a SCHED_IDLE thread may hold
// its slot without running). Under s.mu, after t's last charge.
func (m *osMode) noteLength(t *Task, cpu int64) {
	var isLong bool
	if t.os.handoff {
		used := t.runTime - t.os.uncomputed.Load()
		if cpu >= 0 {
			used = min(used, cpu)
		}
		isLong = used >= int64(osLowerAfter)
	} else {
		isLong = t.os.lowered.Load()
	}
	long := int32(0)
	if isLong {
		long = 1024
	}
	slot := &m.lengths[t.ent.kind]
	old := slot.Load()
	if n := old - old/4 + long/4; n != old {
		slot.Store(n) // only on change: a settled slot's cache line stays shared
	}
}
