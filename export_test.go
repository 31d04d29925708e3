package cpusched

// The package's test seams: options that only its tests use, to control
// time, the slice monitor, the small-task lane and what the operating
// system appears to allow. They set config fields that newConfig
// otherwise fills with the defaults.

import (
	"time"
)

// withClock replaces the clock (tests).
func withClock(c clock) Option {
	return optionFunc(func(cfg *config) error { cfg.clock = c; return nil })
}

// withLaneShare sets the small-task lane's budget, as a share of the slot
// time of each lanePeriod; 0 closes the lane (tests compare with it).
func withLaneShare(share float64) Option {
	return optionFunc(func(cfg *config) error { cfg.laneShare = share; return nil })
}

// withOSHandoff makes IsolationOSPriority hand every task to a worker
// thread, as where a lowered thread cannot be raised back (tests and
// benchmarks of that fallback).
func withOSHandoff() Option {
	return optionFunc(func(cfg *config) error { cfg.osHandoff = true; return nil })
}

// withLendSample replaces the lender's reading of the runtime's goroutine
// counts (lend.go) and samples every tick instead of every lendTick.
func withLendSample(tick time.Duration, f func() (running, runnable uint64, ok bool)) Option {
	return optionFunc(func(cfg *config) error { cfg.lendSample, cfg.lendTick = f, tick; return nil })
}

// withoutSlicePins turns slice pins off (pin.go), for the tests of the
// pinned hand-off alone.
func withoutSlicePins() Option {
	return optionFunc(func(cfg *config) error { cfg.noSlicePins = true; return nil })
}

// withYieldWoken has f called by each lowered thread as it yields its CPU
// on waking (yieldWoken), on that thread.
func withYieldWoken(f func()) Option {
	return optionFunc(func(cfg *config) error { cfg.onYieldWoken = f; return nil })
}

// withPinnedWake has f called by each thread that a hand-off pinned, on
// that thread as it wakes, before it puts its mask back (pin.go).
func withPinnedWake(f func()) Option {
	return optionFunc(func(cfg *config) error { cfg.onPinnedWake = f; return nil })
}

// withoutMonitor stops New from starting the slice monitor (tests that end
// slices by hand with expireSlicesLocked).
func withoutMonitor() Option {
	return optionFunc(func(cfg *config) error { cfg.noMonitor = true; return nil })
}

// withoutMonitorLowering stops the slice monitor from lowering the threads
// of tasks on their own goroutines (tests of Checkpoint's own check).
func withoutMonitorLowering() Option {
	return optionFunc(func(cfg *config) error { cfg.noMonitorLower = true; return nil })
}

// withoutGuard turns the guard against outside contention off
// (contention.go): task threads are lowered as if the machine were quiet,
// for the tests of lowering itself, which a busy test machine must not
// change.
func withoutGuard() Option {
	return optionFunc(func(cfg *config) error { cfg.noGuard = true; return nil })
}

// withGuardSource replaces what the guard reads (contention.go).
func withGuardSource(src guardSource) Option {
	return optionFunc(func(cfg *config) error { cfg.guardSource = src; return nil })
}

// withOS replaces what New asks of the operating system (osAccess): a
// nil field keeps the real one.
func withOS(probeLower, probeRestore func() error, cgroupLimit func() (float64, bool, error)) Option {
	return optionFunc(func(cfg *config) error {
		if probeLower != nil {
			cfg.os.probeLower = probeLower
		}
		if probeRestore != nil {
			cfg.os.probeRestore = probeRestore
		}
		if cgroupLimit != nil {
			cfg.os.cgroupLimit = cgroupLimit
		}
		return nil
	})
}

// cgroupLimit reads the process's real cgroup CPU limit.
func cgroupLimit() (float64, bool, error) { return realOS.cgroupLimit() }
