package cpusched

// Test hooks: the seams through which the package's tests control the
// slice monitor, the small-task lane, IsolationOSPriority's threads and
// what the operating system appears to allow. Production code never sets
// them: config.hooks is nil there, and New reads a nil one as the zero
// testHooks, which is production's behaviour field by field. The options
// that set them are in export_test.go.

import "time"

// testHooks are the tests' changes to New's defaults (config.hooks).
type testHooks struct {
	noMonitor      bool          // no slice monitor: tests end slices themselves (expireSlicesLocked)
	tickKeeps      bool          // without the monitor, slots are still kept (keep.go), and tick gives them on
	noMonitorLower bool          // the monitor lowers no thread: only Checkpoints do (lowerSelf)
	handoffAll     bool          // IsolationOSPriority hands every task to a hand-off thread (dispatch.go)
	laneShare      *float64      // the small-task lane's budget (runqueue.go); nil: defaultLaneShare
	os             osAccess      // New's probes and the cgroup limit (ospriority.go); nil fields: the real ones
	lendSample     lendSampler   // the lender's reading (lend.go); nil: the runtime's goroutine counts
	lendTick       time.Duration // the lender's sampling period; 0: lendTick
	noSlicePins    bool          // no slice pins (pin.go)
	onPinnedWake   func()        // called by a pinned thread as it wakes, before it restores its mask (pin.go)
	onYieldWoken   func(bool)    // called by a task's thread as it yields on waking (yieldWoken), with whether the yield releases its P
	onPark         func(*Task)   // called by a task's goroutine once it has given its slot up at a Checkpoint, before it waits (parking)
	onBeginFn      func(*Task)   // called by a task's goroutine in IsolationOSPriority just before fn begins (osMode.begin)
	onTurn         func()        // called by a task's goroutine on a lowered hand-off thread as it yields to the kernel (turns.go)
	noGuard        bool          // no guard against outside contention (contention.go)
	guardSource    *guardSource  // what the guard reads (contention.go); nil: newRealGuardSource()

	// cpuReading, where set, is read in place of a task's thread's CPU
	// clock, in every mode (readCPU, taskCPUOfLocked): its CPU time since
	// fn began, or -1 for none.
	cpuReading func(*Task) int64
}

// osAccess is realOS with the parts h replaces.
func (h *testHooks) osAccess() osAccess {
	a := realOS
	if h == nil {
		return a
	}
	if h.os.probeLower != nil {
		a.probeLower = h.os.probeLower
	}
	if h.os.probeRestore != nil {
		a.probeRestore = h.os.probeRestore
	}
	if h.os.cgroupLimit != nil {
		a.cgroupLimit = h.os.cgroupLimit
	}
	return a
}

// guardReads is what the guard reads: newRealGuardSource(), or h's.
func (h *testHooks) guardReads() guardSource {
	if h == nil || h.guardSource == nil {
		return newRealGuardSource()
	}
	return *h.guardSource
}

// monitorLowers reports whether the monitor lowers long tasks' threads.
func (h *testHooks) monitorLowers() bool { return h == nil || !h.noMonitorLower }

// pinnedWake calls h.onPinnedWake, if set.
func (h *testHooks) pinnedWake() {
	if h != nil && h.onPinnedWake != nil {
		h.onPinnedWake()
	}
}

// yieldWoken calls h.onYieldWoken(releasing), if set.
func (h *testHooks) yieldWoken(releasing bool) {
	if h != nil && h.onYieldWoken != nil {
		h.onYieldWoken(releasing)
	}
}

// turnTaken calls h.onTurn, if set.
func (h *testHooks) turnTaken() {
	if h != nil && h.onTurn != nil {
		h.onTurn()
	}
}

// parking calls h.onPark(t), if set.
func (h *testHooks) parking(t *Task) {
	if h != nil && h.onPark != nil {
		h.onPark(t)
	}
}

// beginningFn calls h.onBeginFn(t), if set.
func (h *testHooks) beginningFn(t *Task) {
	if h != nil && h.onBeginFn != nil {
		h.onBeginFn(t)
	}
}

// taskCPU returns h.cpuReading(t) where it is set (ok).
func (h *testHooks) taskCPU(t *Task) (cpu int64, ok bool) {
	if h == nil || h.cpuReading == nil {
		return 0, false
	}
	return h.cpuReading(t), true
}
