package cpusched

// The CPU budget, and the one process-wide change cpusched makes: a
// Scheduler raises GOMAXPROCS while it is open, so that one P is left
// beyond its workers. IsolationOSPriority always does (its workers are the
// whole budget); IsolationReserve only where its workers are not fewer
// than the budget (GOMAXPROCS 1, or WithWorkers at or above GOMAXPROCS).

import (
	"log/slog"
	"math"
	"os"
	"runtime"
	"sync"
)

// spareProcs is how many Ps a raise adds beyond the workers, in both
// modes that raise (the guard's contendedSpareProcs aside). One: in the
// prototype measured before this project started, two spare Ps did worse
// under garbage collection than one, since the collector's background
// workers take 25% of GOMAXPROCS, out of the tasks' CPU
// (docs/measurements/ospriority-settings.md#the-prototype).
const spareProcs = 1

// procsState is the process-wide GOMAXPROCS change, shared by every
// Scheduler that raises it (every IsolationOSPriority one, and an
// IsolationReserve one where it needs to: reserveProcs): the first one
// raises it, the last one to close restores it.
//
// The CPU budget. Since Go 1.25 the runtime sets GOMAXPROCS from the
// cgroup CPU limit (rounded up) when the GOMAXPROCS environment variable is
// not set, and keeps updating it while the limit changes, until the
// program calls runtime.GOMAXPROCS(n). cpusched takes its worker count from
// GOMAXPROCS as it found it (the cgroup limit, the environment variable,
// or the program's own call), never from NumCPU, so a container with a
// 1.5-CPU quota on a 64-core host runs 2 CPU-heavy tasks at once, not 64.
// Raising GOMAXPROCS by spareProcs is a runtime.GOMAXPROCS(n) call, so it
// turns the automatic updates off while any Scheduler that raised it is
// open; the restore hands the default back (runtime.SetDefaultGOMAXPROCS,
// which turns them on again) unless the value found was not the default
// (the environment variable was set, or the program had set another
// value), in which case that value is set again.
var procsState struct {
	sync.Mutex
	before int // GOMAXPROCS as the first Scheduler that raised it found it
	raised int // GOMAXPROCS as set now: before, or the most any hold wants
	holds  map[*procsHold]int
}

// procsHold is one Scheduler's want of GOMAXPROCS. A nil *procsHold is no
// want: releasing it does nothing.
type procsHold struct {
	logger *slog.Logger
	once   sync.Once
}

// procsBudget is the CPU budget that worker counts come from: GOMAXPROCS
// as the runtime or the program set it, before any Scheduler raised it.
func procsBudget() int {
	procsState.Lock()
	defer procsState.Unlock()
	if len(procsState.holds) > 0 {
		return procsState.before
	}
	return runtime.GOMAXPROCS(0)
}

// cpuLimit is the cgroup CPU limit that IsolationOSPriority's default
// worker count followed, for New's log.
type cpuLimit struct {
	cpus float64 // 0: none applied
	err  error   // reading the limit failed; it was ignored
}

// osPriorityWorkers is IsolationOSPriority's default worker count for the
// CPU budget procs (see quotaWorkers), and the limit it followed;
// cgroupLimit reads the process's cgroup CPU limit (osAccess).
func osPriorityWorkers(procs int, cgroupLimit func() (float64, bool, error)) (int, cpuLimit) {
	cpus, limited, err := cgroupLimit()
	if err != nil {
		return procs, cpuLimit{err: err}
	}
	n := quotaWorkers(procs, runtime.NumCPU(), cpus, limited, os.Getenv("GOMAXPROCS") != "")
	if n == procs {
		return procs, cpuLimit{}
	}
	return n, cpuLimit{cpus: cpus}
}

// quotaWorkers is IsolationOSPriority's default worker count.
//
// Why a CPU limit needs its own rule: SCHED_IDLE (and nice) order threads
// within what the cgroup may use, but a CFS bandwidth limit stops every
// thread of the cgroup once the period's quota is spent, whatever its
// priority, until the next period (100 ms by default). With as many workers
// as GOMAXPROCS (ceil(limit)), CPU-bound workers spend the quota in every
// period and the rest of the program then waits up to the period's
// remainder: docs/measurements/bench-quota.md has the measurements (quota
// 1.5 on 2 CPUs: throttled in every period). One worker fewer leaves part of
// the quota to the rest of the program and was never throttled there.
//
// The rule applies only when the limit is below the machine's CPU count
// (else it cannot be spent faster than the CPUs allow) and GOMAXPROCS is
// the value the runtime derives from it (max(2, ceil(limit)), at most
// numCPU): when the operator (the GOMAXPROCS variable, envSet) or the
// program set GOMAXPROCS, that number is the budget, as everywhere else.
func quotaWorkers(procs, numCPU int, limit float64, limited, envSet bool) int {
	if !limited || envSet || limit >= float64(numCPU) {
		return procs
	}
	ceil := int(math.Ceil(limit))
	if procs != min(numCPU, max(2, ceil)) {
		return procs // the program set its own GOMAXPROCS
	}
	return max(1, ceil-1)
}

// reserveProcs is IsolationReserve's raise for workers: none (nil) while
// they are fewer than the CPU budget, so that a P is free already, else a
// hold for workers plus spareProcs. With the default worker count that is
// GOMAXPROCS 1 alone (1 worker: GOMAXPROCS 2 while open), where the one
// worker would otherwise hold the only P and the rest of the program would
// wait for Go's 10 ms preemption. Taking no hold where none is
// needed keeps GOMAXPROCS the program's to change.
func reserveProcs(workers int, logger *slog.Logger) *procsHold {
	if workers < procsBudget() {
		return nil
	}
	return raiseProcs(workers+spareProcs, logger)
}

// raiseProcs makes GOMAXPROCS at least want until the returned hold is
// released, or set to want another number. It logs each change, and the
// restore, to logger.
func raiseProcs(want int, logger *slog.Logger) *procsHold {
	procsState.Lock()
	defer procsState.Unlock()
	if len(procsState.holds) == 0 {
		procsState.before = runtime.GOMAXPROCS(0)
		procsState.raised = procsState.before
		procsState.holds = map[*procsHold]int{}
	}
	h := &procsHold{logger: logger}
	procsState.holds[h] = want
	applyProcsLocked(logger)
	return h
}

// set changes h's want to want: GOMAXPROCS follows the most any hold
// wants, and never goes below what the first Scheduler found. Each change
// stops the world for a moment.
func (h *procsHold) set(want int) {
	procsState.Lock()
	defer procsState.Unlock()
	if _, ok := procsState.holds[h]; !ok {
		return // released
	}
	procsState.holds[h] = want
	applyProcsLocked(h.logger)
}

// release drops h; once no hold is left, GOMAXPROCS is restored. It is
// idempotent.
func (h *procsHold) release() {
	if h == nil {
		return
	}
	h.once.Do(func() {
		procsState.Lock()
		defer procsState.Unlock()
		delete(procsState.holds, h)
		if len(procsState.holds) > 0 {
			applyProcsLocked(h.logger)
			return
		}
		if procsState.raised != procsState.before {
			restoreProcs(procsState.before, h.logger)
			procsState.raised = procsState.before
		}
	})
}

// applyProcsLocked sets GOMAXPROCS to the most any hold wants, at least
// what the first Scheduler that raised it found.
func applyProcsLocked(logger *slog.Logger) {
	want := procsState.before
	for _, w := range procsState.holds {
		want = max(want, w)
	}
	if want == procsState.raised {
		return
	}
	if want > procsState.raised {
		logger.Info("cpusched: raised GOMAXPROCS so that a P stays free of the workers (restored when the last Scheduler that raised it closes)", "from", procsState.raised, "to", want)
	} else {
		logger.Info("cpusched: lowered GOMAXPROCS", "from", procsState.raised, "to", want)
	}
	runtime.GOMAXPROCS(want)
	procsState.raised = want
}

// restoreProcs sets GOMAXPROCS back to before: the runtime's default when
// that is what it was, so that the runtime follows the cgroup limit again.
func restoreProcs(before int, logger *slog.Logger) {
	how := "default"
	if os.Getenv("GOMAXPROCS") != "" {
		// SetDefaultGOMAXPROCS ignores the environment variable: the
		// operator's number is set again instead.
		how = "set"
		runtime.GOMAXPROCS(before)
	} else {
		runtime.SetDefaultGOMAXPROCS()
		if runtime.GOMAXPROCS(0) != before {
			// The program had set its own value.
			how = "set"
			runtime.GOMAXPROCS(before)
		}
	}
	logger.Info("cpusched: GOMAXPROCS restored", "to", before, "as", how)
}
