package cpusched

// The package's test seams: options that only its tests use, to control
// time, the slice monitor, the small-task lane, IsolationOSPriority's
// threads and what the operating system appears to allow. withClock sets
// config.clock; the others set config.hooks (testhooks.go), which is nil
// in production.

import "time"

// testHook is an Option that changes the scheduler's test hooks with f.
func testHook(f func(*testHooks)) Option {
	return optionFunc(func(cfg *config) error {
		if cfg.hooks == nil {
			cfg.hooks = new(testHooks)
		}
		f(cfg.hooks)
		return nil
	})
}

// withClock replaces the clock (tests).
func withClock(c clock) Option {
	return optionFunc(func(cfg *config) error { cfg.clock = c; return nil })
}

// withLaneShare sets the small-task lane's budget, as a share of the slot
// time of each lanePeriod; 0 closes the lane (tests compare with it).
func withLaneShare(share float64) Option {
	return testHook(func(h *testHooks) { h.laneShare = &share })
}

// withOSHandoff makes IsolationOSPriority hand every task to a worker
// thread, as where a lowered thread cannot be raised back (tests and
// benchmarks of that fallback).
func withOSHandoff() Option {
	return testHook(func(h *testHooks) { h.handoffAll = true })
}

// withLendSample replaces the lender's reading of the runtime's goroutine
// counts (lend.go) and samples every tick instead of every lendTick.
func withLendSample(tick time.Duration, f func() (running, runnable uint64, ok bool)) Option {
	return testHook(func(h *testHooks) { h.lendSample, h.lendTick = f, tick })
}

// withoutSlicePins turns slice pins off (pin.go), for the tests of the
// pinned hand-off alone.
func withoutSlicePins() Option {
	return testHook(func(h *testHooks) { h.noSlicePins = true })
}

// withYieldWoken has f called by each task's thread as it yields its CPU
// on waking (yieldWoken), on that thread, with whether the yield releases
// its P (made in a system call the runtime knows of).
func withYieldWoken(f func(releasing bool)) Option {
	return testHook(func(h *testHooks) { h.onYieldWoken = f })
}

// withTurn has f called by each task's goroutine on a lowered hand-off
// thread as it yields the thread to the kernel at the end of a turn
// (turns.go), on that goroutine.
func withTurn(f func()) Option {
	return testHook(func(h *testHooks) { h.onTurn = f })
}

// withPark has f called by each task's goroutine in IsolationOSPriority
// once the task has given its slot up at a Checkpoint, before the
// goroutine waits for it (osMode.park), on that goroutine.
func withPark(f func(*Task)) Option {
	return testHook(func(h *testHooks) { h.onPark = f })
}

// withPinnedWake has f called by each thread that a hand-off pinned, on
// that thread as it wakes, before it puts its mask back (pin.go).
func withPinnedWake(f func()) Option {
	return testHook(func(h *testHooks) { h.onPinnedWake = f })
}

// withoutMonitor stops New from starting the slice monitor (tests that end
// slices by hand with expireSlicesLocked).
func withoutMonitor() Option {
	return testHook(func(h *testHooks) { h.noMonitor = true })
}

// withTickKeeps keeps slots at tasks' ends (keep.go) without the monitor:
// the test's tick gives them on.
func withTickKeeps() Option {
	return testHook(func(h *testHooks) { h.tickKeeps = true })
}

// withoutMonitorLowering stops the slice monitor from lowering the threads
// of tasks on their own goroutines (tests of Checkpoint's own check).
func withoutMonitorLowering() Option {
	return testHook(func(h *testHooks) { h.noMonitorLower = true })
}

// withoutGuard turns the guard against outside contention off
// (contention.go): task threads are lowered as if the machine were quiet,
// for the tests of lowering itself, which a busy test machine must not
// change.
func withoutGuard() Option {
	return testHook(func(h *testHooks) { h.noGuard = true })
}

// withGuardSource replaces what the guard reads (contention.go).
// withBeginFn calls f on a task's goroutine in IsolationOSPriority just
// before fn begins (testHooks.onBeginFn).
func withBeginFn(f func(*Task)) Option {
	return testHook(func(h *testHooks) { h.onBeginFn = f })
}

func withGuardSource(src guardSource) Option {
	return testHook(func(h *testHooks) { h.guardSource = &src })
}

// withOS replaces what New asks of the operating system (osAccess): a
// nil field keeps the real one.
func withOS(probeLower, probeRestore func() error, cgroupLimit func() (float64, bool, error)) Option {
	return testHook(func(h *testHooks) {
		if probeLower != nil {
			h.os.probeLower = probeLower
		}
		if probeRestore != nil {
			h.os.probeRestore = probeRestore
		}
		if cgroupLimit != nil {
			h.os.cgroupLimit = cgroupLimit
		}
	})
}

// cgroupLimit reads the process's real cgroup CPU limit.
func cgroupLimit() (float64, bool, error) { return realOS.cgroupLimit() }
