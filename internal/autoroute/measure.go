package autoroute

import (
	"net/http"
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

// ServeInTask serves req, a request of heavy route r, with h inside its
// task, and on a sample of requests records the CPU time it used: read
// at both ends on its thread, or, where the mode does not lock the
// task's goroutine (Table.lockInTask), with the goroutine locked for it.
func (r *Route) ServeInTask(h http.Handler, w http.ResponseWriter, req *http.Request) {
	switch {
	case !r.Next():
		h.ServeHTTP(w, req)
	case r.table.lockInTask:
		defer r.Unlock(Lock())
		h.ServeHTTP(w, req)
	default:
		b := Begin()
		h.ServeHTTP(w, req)
		r.End(b)
	}
}
