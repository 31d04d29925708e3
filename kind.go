package cpusched

// Kinds of work: what the scheduler learns about a task before it has
// run, from the tasks like it that ran before.
//
// The problem. Two things the scheduler decides as a task arrives depend
// on how the task will run: whether it is small (it may use the
// small-task lane, lane.go) and, in IsolationOSPriority, whether it is
// long (it is handed off, dispatch.go). Neither can be read from a task
// that has not run, so both come from the tasks before it. Learned per
// group, the estimate of how far tasks run past their slices took a
// group's small requests for the calls that cannot yield beside them
// (bcrypt, gzip, a render): the bench's neighbor-nockpt step's small
// requests, in the demo's one group with such calls, skipped the lane and
// waited seconds behind them
// (docs/measurements/work-that-cannot-yield.md#kinds-of-work). Learned per
// function, the table of task lengths took every request through one
// adapter (httpsched runs all its tasks through one closure) as one.
//
// A kind is the unit both learn by. A task's kind is WithKind's name, or
// without one its function's code: tasks that run the same function
// literal or method are one kind (a helper that returns a closure, where
// the compiler inlines it, is a literal of its own at each call site).
// httpsched names each request's kind after its route, grpcsched after
// its method. Kinds hash to kindSlots slots, so two kinds may share what
// is learned, as two functions shared a slot of the length table: a
// wrong guess costs one placement, and the next tasks correct it.
//
// Per group, the overrun estimate is kept per kind (groupNode.kinds),
// for up to groupKinds kinds each: a group's calls that cannot yield are
// placed as long, its small requests of another kind as small. A kind is
// learned only as its tasks come to the scheduler, a call that cannot
// yield at its end, so the tasks of such a kind that queued before the
// first one ended leave the lane at its head (demote, lane.go). The
// group's own estimate (GroupStats.Overrun) is kept beside the kinds'.
// The length table (dispatch.go) is indexed by the kind's slot.

import "unsafe"

const (
	// kindSlots is how many slots kinds hash to: the length table's size.
	kindSlots = 64
	// groupKinds is how many kinds' overrun estimates a group keeps. A
	// kind gets one only once a stretch of its tasks runs past its
	// slice (noteKindOverrun), so these are kinds that overran: one past
	// that many replaces the one charged least recently, which starts
	// again from no estimate (small).
	groupKinds = 8
)

// WithKind names the kind of work the task does, for what the scheduler
// learns about a task before it runs from the tasks before it: tasks of
// one kind should be alike in how they run (one route, one call site, one
// library call). Without it, a task's kind is its function: tasks that run
// the same function literal or method are one kind. httpsched gives each
// request its route's kind.
//
// Per kind within each group, the scheduler learns whether the tasks run
// past their slices without coming to a Checkpoint (a call that cannot
// yield, as bcrypt or gzip): a new task of such a kind is placed as the
// long task it likely is, and the group's tasks of other kinds still get
// the small-task lane. In IsolationOSPriority it learns per kind which
// tasks are long enough to hand off to a thread of their own. Give a kind
// where one function runs work of different lengths: a handler that
// serves both a short lookup and a bcrypt call, say, one kind for each.
// Kinds share 64 slots, so two names may share what is learned; any
// string is a name, the empty one too.
func WithKind(name string) TaskOption {
	slot := kindSlotOfName(name)
	return taskOptionFunc(func(tc taskConfig) (taskConfig, error) {
		tc.kind, tc.hasKind = slot, true
		return tc, nil
	})
}

// kindOf is the kind slot of a task running fn with tc: WithKind's, or
// fn's.
func kindOf(tc taskConfig, fn func(*Task) error) uint8 {
	if tc.hasKind {
		return tc.kind
	}
	return kindSlotOf(codePointer(fn))
}

// codePointer is fn's code pointer, as reflect.Value.Pointer returns it
// for a func, read directly: a func value points at a closure record
// whose first word is the code pointer, which is what reflect reads for
// a func that is not a method value (TestKindOf compares the two);
// reflect's checks cost Run about 12 ns of its 200
// (docs/measurements/work-that-cannot-yield.md).
func codePointer(fn func(*Task) error) uintptr {
	return **(**uintptr)(unsafe.Pointer(&fn))
}

// kindSlotOf is the slot of a function's code pointer.
func kindSlotOf(key uintptr) uint8 {
	return uint8(uint64(key>>3) * 0x9E3779B97F4A7C15 >> 58) // Fibonacci hashing to 6 bits
}

// kindSlotOfName is the slot of a kind's name: FNV-1a, then Fibonacci
// hashing to 6 bits.
func kindSlotOfName(name string) uint8 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return uint8(h * 0x9E3779B97F4A7C15 >> 58)
}

// kindOverrun is a group's overrun estimate for one kind slot, as
// groupNode.overrun is the group's (noteOverrun).
type kindOverrun struct {
	overrun int64
	last    int64 // when it was last charged: the least recent is replaced
	slot    uint8
	used    bool
}

// kindOverrun returns g's estimate for kind, or nil if g keeps none.
func (g *groupNode) kindOverrun(kind uint8) *kindOverrun {
	for i := range g.kinds {
		if k := &g.kinds[i]; k.used && k.slot == kind {
			return k
		}
	}
	return nil
}

// noteKindOverrun folds over into g's estimate for kind, charged at now,
// with weight w of overrunWindow, as noteOverrun does the group's. A kind
// g keeps no estimate for reads 0, so a stretch that did not run past its
// slice needs none made: the tasks that come to Checkpoints in time, the
// most common, cost a look-up here and no more. A kind g keeps none for
// takes a free entry, or the place of the kind charged least recently.
func (g *groupNode) noteKindOverrun(kind uint8, over, w, now int64) {
	if g.kindsMax == 0 && over == 0 {
		return // every estimate is 0, this one stays so
	}
	k := g.kindOverrun(kind)
	if k == nil {
		if over == 0 {
			return
		}
		k = g.leastRecentKind()
	}
	old := k.overrun // the replaced kind's, for kindsMax
	if !k.used || k.slot != kind {
		*k = kindOverrun{slot: kind, used: true}
	}
	k.last = now
	k.overrun += (over - k.overrun) * w / overrunWindow
	switch {
	case k.overrun >= g.kindsMax:
		g.kindsMax = k.overrun
	case old == g.kindsMax: // the largest fell, or was replaced: find the new one
		g.kindsMax = 0
		for i := range g.kinds {
			g.kindsMax = max(g.kindsMax, g.kinds[i].overrun)
		}
	}
}

// leastRecentKind is the entry of g a new kind takes: a free one, else
// the one charged least recently.
func (g *groupNode) leastRecentKind() *kindOverrun {
	k := &g.kinds[0]
	for i := range g.kinds {
		if e := &g.kinds[i]; !e.used || (k.used && e.last < k.last) {
			k = e
		}
	}
	return k
}
