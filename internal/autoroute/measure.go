package autoroute

import (
	"runtime"

	"github.com/cpusched/cpusched/internal/osprio"
)

// Measurable reports whether this system has the thread CPU clocks that
// the measures read: without them (off Linux) every route stays light.
func Measurable() bool { return osprio.Supported() }

// Lock locks the calling goroutine to its thread and reads the thread's
// CPU clock, for Unlock: a light route's sample.
func Lock() Reading {
	runtime.LockOSThread()
	if !Measurable() {
		return Reading{}
	}
	return Reading{tid: lockedThread, cpu: osprio.ThreadCPU()}
}

// Unlock records in r the thread's CPU time since b, read by Lock, and
// unlocks the goroutine from its thread.
func (r *Route) Unlock(b Reading) {
	r.End(b)
	runtime.UnlockOSThread()
}

// Reading is where a sample began: the thread (lockedThread for Lock's:
// the goroutine cannot leave it) and its CPU clock.
type Reading struct {
	tid int
	cpu int64
}

// lockedThread is the tid of Lock's readings, whose thread need not be
// read again: a thread id is a system call.
const lockedThread = -1

// Begin reads the calling thread and its CPU clock, for End.
func Begin() Reading {
	if !Measurable() {
		return Reading{}
	}
	return Reading{tid: osprio.ThreadID(), cpu: osprio.ThreadCPU()}
}

// End records in r the CPU time since b, if the calling goroutine is on
// the thread b read (see the package comment); it returns whether it
// was.
func (r *Route) End(b Reading) bool {
	if b.tid == 0 || b.tid != lockedThread && osprio.ThreadID() != b.tid {
		return false
	}
	r.Record(osprio.ThreadCPU() - b.cpu)
	return true
}
