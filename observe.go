package cpusched

// What a Scheduler shows of itself to the tools a Go team already runs:
// pprof labels on the goroutines that run tasks, runtime/trace tasks and
// regions, and an optional slog.Logger for its own events. All of it costs
// a few nanoseconds per task when nobody profiles, traces or logs
// (BenchmarkRun before and after:
// docs/performance.md#observability-hooks-when-unused).

import (
	"context"
	"log/slog"
	"runtime/pprof"
	"runtime/trace"
)

// The pprof labels that task code runs under, for `go tool pprof -tagfocus`
// and -tagshow. cpusched_group is set only for tasks of a named group.
const (
	LabelClass = "cpusched_class"
	LabelGroup = "cpusched_group"
)

// taskLabels returns t's pprof labels.
func taskLabels(t *Task) pprof.LabelSet {
	if t.groupName == "" {
		return pprof.Labels(LabelClass, t.class().String())
	}
	return pprof.Labels(LabelClass, t.class().String(), LabelGroup, t.groupName)
}

// prepareLabelsLocked makes, once per class and tracked group, the context
// whose labels the goroutines running such tasks take: with it, setting
// them costs a pointer store instead of an allocation. Tasks of untracked
// groups (see SetGroupWeight) make theirs in setLabels.
func (s *Scheduler) prepareLabelsLocked(t *Task) {
	if t.gstats == &s.otherGroups {
		return
	}
	if t.gstats.labels[t.classID] == nil {
		t.gstats.labels[t.classID] = pprof.WithLabels(context.Background(), taskLabels(t))
	}
}

// hasLabels reports whether ctx carries pprof labels.
func hasLabels(ctx context.Context) bool {
	has := false
	pprof.ForLabels(ctx, func(string, string) bool { has = true; return false })
	return has
}

// setLabels gives the calling goroutine t's labels, added to those of the
// context passed to Run or Go, as pprof.Do would. It returns the context
// whose labels the goroutine should take back when fn returns: ctx's, as
// pprof.Do restores them.
func (t *Task) setLabels() (restore context.Context) {
	if hasLabels(t.ctx) {
		pprof.SetGoroutineLabels(pprof.WithLabels(t.ctx, taskLabels(t)))
		return t.ctx
	}
	// A tracked group's labels context was made when t was accepted,
	// before t could reach this goroutine, and is never changed after;
	// the other groups' counters never get one.
	labels := t.gstats.labels[t.classID]
	if labels == nil {
		labels = pprof.WithLabels(context.Background(), taskLabels(t))
	}
	pprof.SetGoroutineLabels(labels)
	return context.Background()
}

// taskTrace is a task's runtime/trace task and its current region.
type taskTrace struct {
	task   *trace.Task
	region *trace.Region
}

// Names of the trace task and regions (go tool trace, "User-defined tasks"
// and "User-defined regions").
const (
	traceTaskPrefix = "cpusched."         // + class: one trace task per cpusched task
	traceRun        = "cpusched.run"      // a slice: the task holds a slot
	traceBlocking   = "cpusched.blocking" // inside Task.Blocking
)

// startTrace makes t a trace task when tracing is on, so that the task's
// context (and so regions the task code starts) belong to it.
func (t *Task) startTrace() {
	if !trace.IsEnabled() {
		return
	}
	ctx, tt := trace.NewTask(t.ctx, traceTaskPrefix+t.class().String())
	t.ctx = ctx
	t.trace = &taskTrace{task: tt}
}

// traceRegion starts a region of t on the calling goroutine, ending the
// current one. Regions nest per goroutine, so task code should end the
// regions it starts before it calls Checkpoint or Blocking.
func (t *Task) traceRegion(name string) {
	if t.trace == nil {
		return
	}
	t.traceEndRegion()
	t.trace.region = trace.StartRegion(t.ctx, name)
}

// traceEndRegion ends t's current region, if any.
func (t *Task) traceEndRegion() {
	if t.trace != nil && t.trace.region != nil {
		t.trace.region.End()
		t.trace.region = nil
	}
}

// endTrace ends t's trace task. Its regions were ended by the goroutine
// that ran it.
func (t *Task) endTrace() {
	if t.trace != nil {
		t.trace.task.End()
	}
}

// leave undoes what call did to the goroutine before fn: it ends the run
// region and gives back the labels.
func (t *Task) leave(restore context.Context) {
	t.traceEndRegion()
	pprof.SetGoroutineLabels(restore)
}

// discardLogger is the logger of a Scheduler made without WithLogger.
var discardLogger = slog.New(slog.DiscardHandler)
