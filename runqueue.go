package cpusched

// The run queue: which waiting task gets the next free worker slot.
//
// The problem. Tasks wait for one of a fixed number of worker slots. When a
// slot frees (a task finished, went into Blocking, or gave its slot up at a
// Checkpoint), one waiting task must be chosen so that (1) CPU is shared by
// weight (nice, group weight), (2) latency-sensitive and new tasks run soon,
// (3) classes keep their Linux meaning, and (4) nothing starves.
//
// Rejected approaches:
//   - One FIFO (a semaphore): no weights, and a small task waits behind every
//     large one.
//   - cpuworker's three fixed-priority queues (event-intensive, new,
//     CPU-heavy): a steady stream of one kind starves the next.
//   - CFS's min-vruntime order alone: fair, but a task that asks for short
//     slices gets no lower latency for it.
//
// The chosen structure is the kernel's, scaled down (see eevdf.go for the
// arithmetic):
//
//  1. Four class queues, tried in this order: exit (tasks whose context ended
//     while they waited for their slot back: they only need to unwind),
//     realtime, fair (Normal and Batch), idle.
//  2. Realtime is throttled: once it has used rtRuntimeShare of the slot time
//     in the current rtPeriod while others wait, the others go first until the
//     period ends. Idle is guaranteed idleShare: while it is behind that share
//     it goes first once.
//  3. Inside a class, groups are EEVDF entities weighted by their group weight;
//     inside the chosen group, tasks are EEVDF entities weighted by nice.
//     What a group owes, it pays. A task's run time (its thread's CPU
//     time where that can be read, else its slot time: charge.go) reaches
//     the policy when the task comes to the scheduler (a Checkpoint, a
//     Blocking call, its end), all at once for a task that ran 40 ms
//     without one; a tracked group whose last task then leaves in debt
//     stays counted in V until the others have run enough to repay it
//     (eevdf.go: leave), and a task that ends in debt leaves it in its
//     group's V (depart), where the group's next new task takes it over
//     (adopt), so that neither its group's next task nor, in a closed
//     loop, its client's starts level. A task that ends with credit (it
//     waited longer than it ran) leaves that to the next new task too,
//     fading as V moves, so that in a closed loop a client of short
//     calls keeps what it is owed as a client of long ones keeps its debt.
//     The debt is bounded by maxGroupDebt, and so is what a new task
//     takes over; credit otherwise, as before, by the lag clamp: a group
//     that was idle banks none.
//  4. A task's request (slice) sets its deadline: new tasks start with no
//     lag, as the kernel's, and ask for a quarter slice first; tasks whose
//     bursts are short against their Blocking waits ask for
//     proportionally shorter slices; Batch asks for four slices. A new
//     task of a kind whose tasks run past their slices in its group
//     before they come to the scheduler (the overrun estimate of its
//     kind in its group, noteOverrun, kind.go) asks for its slice plus
//     that overrun, as long as it likely runs, and is not small.
//  5. Before EEVDF picks in the fair class, small tasks (Normal tasks that
//     have used less than one slice, at most 1 ms) are served first come,
//     first served from a lane, within a budget (lane.go).
//
// The policy is the runQueue type: a data structure with no goroutines,
// channels or clock of its own (the mechanism passes the time in), no
// lock of its own (every method is called with Scheduler.mu held) and no
// statistics (the mechanism counts). Nothing here runs on Checkpoint's
// fast path.

import "time"

const (
	qExit = iota
	qRealtime
	qFair
	qIdle
	numQueues
)

const (
	// rtPeriod and rtRuntimeShare are the kernel's sched_rt_period_us (1 s)
	// and sched_rt_runtime_us (0.95 s) defaults: realtime tasks may take 95%
	// of the slot time of a period while others wait.
	rtPeriod       = int64(1e9)
	rtRuntimeShare = 0.95
	// idleShare is the share an idle task gets against one nice-0 task under
	// the kernel's SCHED_IDLE weight: 3/(3+1024).
	idleShare = 3.0 / (3 + 1024)
	// batchSliceFactor stretches Batch slices: fewer switches for throughput
	// work that nobody waits on.
	batchSliceFactor = 4
	// firstSliceDivisor shortens a new task's first slice (cpuworker: 200us
	// against 1 ms) so that small tasks finish in their first run.
	firstSliceDivisor = 4
	// minLatencyFactor bounds how much shorter a latency-sensitive task's
	// request may get: an eighth of its slice.
	minLatencyFactor = 8
)

// queueOf returns the queue a class uses.
func queueOf(c Class) int {
	switch c {
	case ClassRealtime:
		return qRealtime
	case ClassIdle:
		return qIdle
	}
	return qFair
}

// groupNode is a group's entity inside one class queue, and the EEVDF queue
// of that group's tasks in that class.
type groupNode struct {
	entity
	name    string
	class   *classQueue
	tasks   eevdfQueue
	waiting int  // its waiting tasks: in tasks' heaps and in the lane
	inHeaps int  // of waiting, those in tasks' heaps (the others wait in the lane)
	active  int  // tasks active (waiting or holding a slot)
	tracked bool // its group is tracked (runQueue.tracked): the node stays while idle
	// lane is the group's small-task lane, two FIFOs through
	// Task.laneLink: laneRan for the tasks that have had a slot (back from
	// Blocking or a Checkpoint), served first, and lane for new ones;
	// laneLink links the groups with a non-empty lane
	// (classQueue.laneGroups).
	lane, laneRan list[Task]
	laneLink      link[groupNode]
	// overrun is the policy's estimate of how far past the end of its
	// slice a task of the group runs before it comes to the scheduler
	// (noteOverrun), and kinds the same per kind of task (kind.go), which
	// place the group's new tasks (overruns).
	overrun int64
	kinds   [groupKinds]kindOverrun
	// kindsMax is the largest of kinds' estimates: while it is 0, as in
	// a group whose tasks all come to Checkpoints in time, a new task's
	// placement needs no look-up.
	kindsMax int64
	// leftV is its class queue's V just after the group last left it (it
	// had no active task), for the credit it keeps if it comes straight
	// back (activate).
	leftV int64
}

// classQueue holds the groups with active tasks of one class.
type classQueue struct {
	groups eevdfQueue
	byName map[string]*groupNode // active groups, and idle tracked ones
	// last is the node of the tracked group that last became active here,
	// which a tracked group's next task most likely joins: it saves the
	// map look-up on the path of every task. Only a tracked group's node,
	// which is never freed, is kept.
	last       *groupNode
	nwaiting   int             // tasks of this class waiting: in the heaps and lanes
	laneGroups list[groupNode] // groups with lane tasks (fair class only)
}

// runQueue is the policy: which waiting task gets the next free slot.
type runQueue struct {
	queues    [numQueues]classQueue
	nwaiting  int     // waiting tasks (queued or parked, in the Scheduler's words): in the heaps and lanes
	slice     int64   // the scheduler's slice: the groups' requests, the lane's cap
	cpuClock  bool    // the lane counts thread CPU time (used)
	workers   int     // slots: the shares below are of workers x time
	laneShare float64 // the lane's budget, a share of each lanePeriod
	// The bandwidth period of realtime's throttle and idle's share, and the
	// lane's budget period.
	periodStart, laneStart int64
	periodUsed             [numQueues]int64
	laneUsed               int64 // slot time the lane's tasks used in the lane's period
	waitingSince           int64 // when nwaiting last became non-zero
	// tracked has the weights SetGroupWeight set (and the default group's).
	// A tracked group's nodes stay while it is idle, keeping its lag;
	// other groups weigh DefaultGroupWeight and their nodes are freed when
	// their last task leaves, so memory does not grow with group names.
	tracked map[string]int
}

// newRunQueue returns an empty run queue for workers slots of slice, with
// the lane's budget laneShare, whose first periods start at now.
func newRunQueue(slice int64, workers int, laneShare float64, now int64) runQueue {
	q := runQueue{slice: slice, workers: workers, laneShare: laneShare, periodStart: now, laneStart: now,
		tracked: map[string]int{"": DefaultGroupWeight}}
	for i := range q.queues {
		q.queues[i] = classQueue{groups: newEEVDFQueue(), byName: map[string]*groupNode{}, laneGroups: list[groupNode]{at: groupLaneLink}}
	}
	return q
}

// setGroupWeight sets a group's weight and makes it tracked; it applies at
// once to the group's nodes, active or not.
func (q *runQueue) setGroupWeight(name string, weight int) {
	q.tracked[name] = weight
	w := groupWeight(weight)
	for i := range q.queues {
		cq := &q.queues[i]
		g := cq.byName[name]
		if g != nil {
			g.tracked = true
		}
		switch {
		case g == nil || g.weight == w:
		case g.active > 0 || g.delayed:
			inHeap := g.heapIdx >= 0 && !g.delayed
			if inHeap {
				cq.groups.remove(&g.entity)
			}
			cq.groups.reweight(&g.entity, w)
			if inHeap {
				cq.groups.push(&g.entity)
			}
		default: // inactive: not in V; keep its lag in wall-clock terms
			g.lag = g.lag * g.weight / w
			g.weight = w
		}
	}
}

// waiting returns every waiting task: in the heaps and in the lanes.
func (q *runQueue) waiting() []*Task {
	var ts []*Task
	for i := range q.queues {
		for _, g := range q.queues[i].byName {
			for _, h := range []*entityHeap{&g.tasks.ready, &g.tasks.later} {
				for _, e := range h.items {
					ts = append(ts, e.task)
				}
			}
			for _, l := range []*list[Task]{&g.laneRan, &g.lane} {
				for t := l.head; t != nil; t = t.laneLink.next {
					ts = append(ts, t)
				}
			}
		}
	}
	return ts
}

// requestSlice is the slice t asks for when it next gets a deadline.
func requestSlice(t *Task, first bool) int64 {
	slice := int64(t.slice)
	if first {
		return max(slice/firstSliceDivisor, int64(minSlice))
	}
	if t.avgWait > t.avgBurst && t.avgBurst > 0 {
		// Latency-sensitive: short CPU bursts between long waits. Ask for
		// the burst's share of the slice, at least 1/minLatencyFactor.
		scaled := int64(float64(slice) * float64(t.avgBurst) / float64(t.avgBurst+t.avgWait))
		slice = max(scaled, slice/minLatencyFactor)
	}
	return slice
}

// activate makes t active in the group of its current queue, creating
// and activating the group as needed. first is true for a task that has
// never run.
func (q *runQueue) activate(t *Task, first bool) {
	cq := &q.queues[t.qidx]
	g := cq.last
	if g == nil || g.name != t.groupName {
		g = cq.byName[t.groupName]
	}
	if g == nil {
		w, tracked := q.tracked[t.groupName]
		if !tracked {
			w = DefaultGroupWeight
		}
		g = &groupNode{name: t.groupName, class: cq, tasks: newEEVDFQueue(), lane: list[Task]{at: taskLaneLink}, laneRan: list[Task]{at: taskLaneLink}, tracked: tracked}
		g.entity = entity{weight: groupWeight(w), heapIdx: -1, group: g}
		cq.byName[t.groupName] = g
	}
	if g.tracked {
		cq.last = g
	}
	switch {
	case g.delayed:
		cq.groups.undelay(&g.entity) // back before its debt was paid: it still owes it
	case g.active == 0:
		vslice := scaleVirtual(q.slice, g.weight)
		limit := lagClampSlices * vslice
		if g.lag > 0 && cq.groups.V()-g.leftV < vslice {
			// Back before the others ran a slice of its: the credit it
			// earned waiting is not idle time, and is kept, up to the
			// bound of a debt. A closed-loop caller's group leaves at each
			// task's end; clamped to two slices, its credit for waiting
			// out a 20 ms call that cannot yield was forgiven at once,
			// and at equal weights it got 23% beside the calls' group
			// (TestKeptSlotSharesWithCalls).
			limit = scaleVirtual(maxGroupDebt, g.weight)
		}
		cq.groups.activateWithin(&g.entity, limit, vslice)
	}
	g.active++
	t.group = g
	// A new task starts with no lag (t.ent.lag is 0), as in the kernel. It
	// used to start one slice of credit ahead, so that its short first
	// request beat the deadlines of the tasks already waiting; the lane does
	// that job now, and the credit starved tasks under a steady stream of
	// new ones: with 100 tasks cycling through 2 slots in
	// IsolationOSPriority (10 ms slices, so 10 ms of credit each), a task
	// that had used its own credit lost to every newer task, and some waited
	// for seconds, until the stream stopped
	// (docs/measurements/small-task-lane.md#starvation-under-a-stream-of-new-tasks).
	// What it may take over (adopt) is not a head start but the debt or
	// credit its group's last ended task left: lag that task had, which
	// the others' lags already count against.
	req := requestSlice(t, first)
	if first && q.overruns(t) {
		// Its kind's tasks in its group run past their slices: ask for as
		// long as they do, so that the deadline says what the task likely
		// is.
		req = longRequest(t)
	}
	vreq := scaleVirtual(req, t.ent.weight)
	if !first || !g.tasks.adopt(&t.ent, maxGroupDebt, vreq) {
		g.tasks.activate(&t.ent, int64(t.slice), vreq)
	}
}

// deactivate makes t inactive: it ended (ended), or went into Blocking,
// or moves to another queue; its group goes when its last active task
// does. t must not be waiting.
func (q *runQueue) deactivate(t *Task, ended bool) {
	g := t.group
	g.tasks.depart(&t.ent, ended)
	g.tasks.settle()
	g.active--
	if g.active == 0 {
		cq := g.class
		if !g.tracked {
			// Not tracked (see SetGroupWeight): free the node, and with it
			// the group's lag and debt, so that memory does not grow with
			// the number of group names. A tracked group's node stays, so a
			// group that comes and goes with each task costs no
			// allocation, keeps its lag, and stays in V while it owes
			// (leave).
			cq.groups.deactivate(&g.entity)
			delete(cq.byName, g.name)
		} else {
			cq.groups.leave(&g.entity)
			g.leftV = cq.groups.V() // without g: it moves only as the others run
		}
		cq.groups.settle()
	}
	t.group = nil
}

// add makes active task t wait: in its group's lane if it is small, in
// the heaps otherwise.
func (q *runQueue) add(t *Task) {
	g := t.group
	if q.small(t) {
		laneJoin(t)
	} else {
		g.tasks.push(&t.ent)
		g.inHeaps++
	}
	if g.waiting++; g.waiting == 1 {
		g.class.groups.push(&g.entity)
	}
	g.class.nwaiting++
	if q.nwaiting == 0 {
		q.waitingSince = t.since // when t began to wait
	}
	q.nwaiting++
}

// remove takes waiting task t out of the lane or the heaps; it stays
// active.
func (q *runQueue) remove(t *Task) {
	g := t.group
	if t.inLane {
		laneLeave(t)
	} else {
		g.tasks.remove(&t.ent)
		g.inHeaps--
	}
	if g.waiting--; g.waiting == 0 {
		g.class.groups.remove(&g.entity)
	}
	g.class.nwaiting--
	q.nwaiting--
}

// charge charges a stretch of t on its slot, ending at now: slot, its
// slot time, to the lane's budget if the lane gave t its slot (it reports
// whether it did), to the bandwidth periods and the overrun estimate;
// service, what the weights share (its CPU time where measured: charge.go),
// to t's vruntime and its group's. used is the stretch's CPU time as its
// thread's clock read it, or -1 where it was not measured.
func (q *runQueue) charge(t *Task, slot, service, used, now int64) (lane bool) {
	if q.nwaiting > 0 {
		q.noteOverrun(t, slot, used, now)
	}
	return q.account(t, slot, service, now)
}

// account is charge but for the overrun estimate: also what a kept slot
// costs the task that takes it (keep.go, chargeKept).
func (q *runQueue) account(t *Task, slot, service, now int64) (lane bool) {
	g := t.group
	if g.tasks.account(&t.ent, service) {
		// The request is used up, in one stretch or in pieces between
		// preemptions: ask for a new one (a new deadline).
		g.tasks.renew(&t.ent, scaleVirtual(requestSlice(t, false), t.ent.weight))
	}
	g.tasks.settle()
	cq := g.class
	if cq.groups.account(&g.entity, service) {
		cq.groups.renew(&g.entity, scaleVirtual(q.slice, g.weight))
	}
	cq.groups.boundDebt(&g.entity, scaleVirtual(maxGroupDebt, g.weight))
	cq.groups.settle()
	lane = t.laneRun
	if lane {
		q.rollLane(now)
		q.laneUsed += slot
		t.laneRun = q.used(t) < q.laneSlice(t)
	}
	q.rollPeriod(now)
	q.periodUsed[t.qidx] += slot
	return lane
}

// rollPeriod starts a new bandwidth period when the current one is over.
func (q *runQueue) rollPeriod(now int64) {
	if now-q.periodStart >= rtPeriod {
		q.periodStart = now
		q.periodUsed = [numQueues]int64{}
	}
}

// rtThrottled reports whether realtime has used its share of this period.
func (q *runQueue) rtThrottled() bool {
	return float64(q.periodUsed[qRealtime]) >= rtRuntimeShare*float64(rtPeriod)*float64(q.workers)
}

// idleStarved reports whether idle is behind its guaranteed share of the
// slot time elapsed in this period.
func (q *runQueue) idleStarved(now int64) bool {
	elapsed := now - q.periodStart
	return float64(q.periodUsed[qIdle]) < idleShare*float64(elapsed)*float64(q.workers)
}

// pickQueue returns the queue the next task comes from, or -1.
func (q *runQueue) pickQueue(now int64) int {
	if q.nwaiting == 0 {
		return -1
	}
	cq := &q.queues
	if cq[qExit].nwaiting > 0 {
		return qExit
	}
	q.rollPeriod(now)
	others := cq[qFair].nwaiting + cq[qIdle].nwaiting
	if cq[qIdle].nwaiting > 0 && q.idleStarved(now) {
		return qIdle
	}
	if cq[qRealtime].nwaiting > 0 && (others == 0 || !q.rtThrottled()) {
		return qRealtime
	}
	if cq[qFair].nwaiting > 0 {
		return qFair
	}
	return qIdle
}

// pick removes and returns the task that should run next, or nil.
func (q *runQueue) pick(now int64) *Task {
	t, lane := q.next(now)
	if t == nil {
		return nil
	}
	q.remove(t)
	t.laneRun = lane
	return t
}

// next returns the task that should run next, or nil, and whether the
// lane gives it its slot, without taking it from the queue.
func (q *runQueue) next(now int64) (t *Task, lane bool) {
	qi := q.pickQueue(now)
	if qi < 0 {
		return nil, false
	}
	if qi == qFair {
		if t := q.lanePeek(now); t != nil {
			return t, true
		}
	}
	g := q.queues[qi].groups.peek().group
	if g.inHeaps > 0 {
		return g.tasks.peek().task, false
	}
	return g.laneHead(), false // only lane tasks wait in g
}

// sliceLeft is the wall-clock time t may run before its vruntime reaches
// its deadline: the rest of its current request, which a preemption in
// the middle does not renew; for a task the lane picked, the rest of its
// first slice of run time.
func (q *runQueue) sliceLeft(t *Task) int64 {
	left := (t.ent.deadline - t.ent.vruntime) * t.ent.weight / nice0Weight
	if left <= 0 {
		left = requestSlice(t, false)
	}
	left = min(left, int64(t.slice)) // a long first request (overruns) is no longer a slice
	if t.laneRun {
		left = q.laneSlice(t) - q.used(t) // the lane serves the first slice
	}
	return max(left, int64(minSlice))
}

// overrunWindow is the run time a group's overrun estimate averages
// over: long enough that one task of a few ms does not swing it, short
// enough that a group whose tasks change (a new handler, a fixed loop)
// is seen as it is within a few of its long tasks.
const overrunWindow = int64(100 * time.Millisecond)

// noteOverrun folds into t's group's overrun estimate, and into its
// kind's there, how far past its slice t ran before it came to the
// scheduler now, having run delta
// since it last did (used of it on the CPU, or -1 where not measured):
// at a Checkpoint, a Blocking call or its end. Only the part of the
// stretch while others waited counts: a task that nobody waits for is
// not asked to stop at its slice's end, so running on tells nothing. A
// task was asked at its slice's end, or when others began to wait if
// later; the estimate is a moving average weighted by that contended run
// time, so that a 40 ms task that never yields weighs as much as the
// forty 1 ms slices of the tasks that do.
//
// Where its thread's CPU time is measured, the overrun is the CPU it
// used past that point (at least: all the CPU of the stretch less the
// stretch's time before it), not the wall time. Why: beside a busy
// process the kernel runs the neighbour's threads in turns with a task's,
// and a task that comes to a Checkpoint every few microseconds of its
// own work often reached it milliseconds late in wall time. Counted so,
// the bench's neighbor step put its one group's estimate around the
// lane's slice: the small requests were placed as long ones whenever it
// was above, and waited behind the CPU-heavy tasks for up to seconds
// (docs/measurements/busy-machine.md#the-overrun-in-cpu-time).
// A call that cannot yield runs on the CPU past its slice, and reads so.
//
// Where threads' CPU clocks are read (cpuClock) but this stretch's was
// not, the stretch does not count. Such a stretch ended before its
// task's thread had a mark, which the monitor takes within its first
// look once the goroutine runs fn: its wall time is mostly the wait for
// the goroutine to run at all, which is the runtime's and the kernel's,
// not the task's. One such stretch, of a task given its slot while the
// program stood still, set the estimate to its whole length at once;
// each new task of the group then asked for its slice plus that, and
// small requests waited behind every CPU-heavy task for as long as the
// estimate took to decay
// (docs/measurements/busy-machine.md#a-stretch-that-was-not-measured).
func (q *runQueue) noteOverrun(t *Task, delta, used, now int64) {
	if used < 0 && q.cpuClock {
		return
	}
	from := max(now-delta, q.waitingSince)
	if from >= now {
		return
	}
	asked := max(t.sliceEnd, q.waitingSince)
	over := max(now-asked, 0)
	if used >= 0 {
		before := max(asked-(now-delta), 0) // the stretch's time before it was asked
		over = min(over, max(used-before, 0))
	}
	over = min(over, maxGroupDebt)
	g := t.group
	w := min(now-from, overrunWindow)
	g.overrun += (over - g.overrun) * w / overrunWindow
	g.noteKindOverrun(t.ent.kind, over, w, now)
}

// overruns reports whether the tasks of t's kind in t's group run past
// their slices by more than the lane serves (laneSlice): t is then placed
// as what it likely is, a long task, not a small one (small, activate).
// Per kind, not per group: a group's small requests are not taken for
// the calls that cannot yield beside them (kind.go).
func (q *runQueue) overruns(t *Task) bool {
	return taskOverrun(t) >= q.laneSlice(t)
}

// longRequest is the request of a new task of a kind that overruns:
// its slice plus its kind's overrun, as long as it likely runs.
func longRequest(t *Task) int64 { return int64(t.slice) + taskOverrun(t) }

// taskOverrun is the overrun estimate of t's kind in t's group: 0 where
// the group keeps none.
func taskOverrun(t *Task) int64 {
	if t.group == nil || t.group.kindsMax == 0 {
		return 0
	}
	if k := t.group.kindOverrun(t.ent.kind); k != nil {
		return k.overrun
	}
	return 0
}
