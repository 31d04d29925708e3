package priority

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// The OS rows: the scheduling settings each child gives its working thread.
const (
	Normal = "normal"  // SCHED_OTHER, nice 0
	Nice   = "nice-20" // nice -20; nice +19 when the process may not raise priority
	Batch  = "batch"   // SCHED_BATCH
	Idle   = "idle"    // SCHED_IDLE
	RR     = "rr99"    // SCHED_RR priority 99
)

// Policies returns every OS row in table order.
func Policies() []string { return []string{Normal, Nice, Batch, Idle, RR} }

// Linux scheduling policy numbers (sched.h).
const (
	schedNormal = 0
	schedRR     = 2
	schedBatch  = 3
	schedIdle   = 5
)

// osCalls are the system calls applyPolicy makes; tests replace them to
// show the unprivileged paths.
type osCalls struct {
	setNice   func(tid, nice int) error
	setPolicy func(tid int, policy, priority uint32) error
}

// denyPrivileged wraps c so that every call that needs CAP_SYS_NICE (a
// negative nice, a real-time policy) fails with EPERM, as it does for an
// unprivileged user: -unprivileged uses it to show the skip path as root.
func denyPrivileged(c osCalls) osCalls {
	return osCalls{
		setNice: func(tid, nice int) error {
			if nice < 0 {
				return syscall.EPERM
			}
			return c.setNice(tid, nice)
		},
		setPolicy: func(tid int, policy, priority uint32) error {
			if policy == schedRR {
				return syscall.EPERM
			}
			return c.setPolicy(tid, policy, priority)
		},
	}
}

// skipReason turns a failed privileged call into the row's "skipped:"
// text; errors other than a permission error are reported as they are.
func skipReason(what string, err error) string {
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		return what + " needs CAP_SYS_NICE"
	}
	return fmt.Sprintf("%s: %v", what, err)
}

// applyPolicy gives thread tid the setting of row p. It returns the label
// of what is in effect, or skipped with the reason when the setting is not
// allowed (the thread then keeps its default). nice -20 falls back to nice
// +19 when not allowed, as the seed's comparison can still be made from
// the other side.
func applyPolicy(p string, tid int, c osCalls) (label, skipped string) {
	switch p {
	case Normal:
		return "normal (nice 0)", ""
	case Nice:
		err := c.setNice(tid, -20)
		if err == nil {
			return "nice -20", ""
		}
		if err2 := c.setNice(tid, 19); err2 != nil {
			return "", skipReason("nice -20", err) + "; nice +19: " + err2.Error()
		}
		return "nice +19 (" + skipReason("nice -20", err) + ")", ""
	case Batch:
		if err := c.setPolicy(tid, schedBatch, 0); err != nil {
			return "", skipReason("SCHED_BATCH", err)
		}
		return "SCHED_BATCH", ""
	case Idle:
		if err := c.setPolicy(tid, schedIdle, 0); err != nil {
			return "", skipReason("SCHED_IDLE", err)
		}
		return "SCHED_IDLE", ""
	case RR:
		if err := c.setPolicy(tid, schedRR, 99); err != nil {
			return "", skipReason("SCHED_RR 99", err)
		}
		return "SCHED_RR 99", ""
	}
	return "", fmt.Sprintf("unknown policy %q (valid: %s)", p, strings.Join(Policies(), ","))
}
