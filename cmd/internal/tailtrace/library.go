package tailtrace

// The library's names by which a trace shows a cpusched worker: a
// goroutine that runs a task's region, or that has the worker loop on its
// stack (a worker between tasks, or running one that began before the
// trace). They must follow the library's own names: when the library
// renames its worker loop, its run region or its module, rename them here
// too (the tests record a real worker to catch that).
const (
	// libraryPath is the library's import path, which the runtime puts
	// before every function name of the library in a stack frame:
	// "github.com/cpusched/cpusched.(*Scheduler).Close".
	libraryPath = "github.com/cpusched/cpusched"
	// workerLoop is the function at the bottom of every
	// IsolationOSPriority worker goroutine's stack, named as its frame is
	// (the library's (*Scheduler).handoffLoop).
	workerLoop = libraryPath + ".(*Scheduler).handoffLoop"
	// runRegion is the trace region a task's slice runs in (the
	// library's traceRun).
	runRegion = "cpusched.run"
)

// isWorkerFrame reports whether a stack frame's function, as the trace
// reader names it, is the library's worker loop. The whole name is
// compared, import path included, so that a function of the same name in
// another package (a fork, a test double) is not taken for it.
func isWorkerFrame(fn string) bool { return fn == workerLoop }
