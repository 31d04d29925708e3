package cpusched

import "time"

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
//  4. A task's request (slice) sets its deadline: new tasks start with no
//     lag, as the kernel's, and ask for a quarter slice first; tasks whose
//     bursts are short against their Blocking waits ask for
//     proportionally shorter slices; Batch asks for four slices.
//  5. Before EEVDF picks in the fair class, small tasks (Normal tasks that
//     have used less than one slice, at most 1 ms) are served first come, first served
//     from a lane, within a budget (see "The small-task lane" below).
//
// The policy is the runQueue type: a data structure with no goroutines,
// channels or clock of its own (the mechanism passes the time in), no
// lock of its own (every method is called with Scheduler.mu held) and no
// statistics (the mechanism counts). Nothing here runs on Checkpoint's
// fast path.
//
// The small-task lane.
//
// The problem. A task that needs a fraction of a slice should not wait
// behind long tasks that were preempted at a Checkpoint. EEVDF alone
// mostly gets this right (a new task asks for a short first request), but
// not always: a long task preempted in the middle of its
// request keeps its near deadline, and one that has waited long has lag
// that puts its deadline before a newcomer's. And the wakeup preemption
// that makes room for a newcomer asked one running task to come to a
// Checkpoint: in IsolationOSPriority that task's thread may be the one the
// kernel is not running (its threads give way to every other thread), and
// the newcomer then waits until the other slot's slice ends. The other
// way round, nothing bounded what new tasks take: under a flood of them
// (arriving faster than the slots can serve them) each one's head start
// beat the long tasks' deadlines, which got 0.03% of the slot time.
//
// Rejected approaches:
//   - A bigger head start (more lag for new tasks): the credit is paid by
//     the waiting tasks, any amount loses to some long task's lag, and a
//     flood takes everything.
//   - cpuworker's fixed-priority queue for new tasks: a steady stream of
//     them starves the rest, and they run uncharged.
//   - A lane whose tasks stay in the EEVDF heaps, so that EEVDF orders
//     them once the budget is used: the head start then gives a flood the
//     rest of the slot time too.
//
// The lane, as it works:
//
//  1. A queued Normal task that has used less than its slice (small; the
//     slice counts up to the scheduler's and to DefaultSlice, laneSlice;
//     used is slot time, or in IsolationOSPriority the CPU time of the
//     task's worker thread, see used) waits in its group's lane instead of
//     the EEVDF heaps. It stays active, so its vruntime counts in V as any
//     other's. The fair class keeps the groups with a non-empty lane in a
//     list. The lane is two FIFOs: tasks that have had a slot (back from
//     Blocking or a Checkpoint), then new ones.
//  2. When a fair task is to be picked and the lane is open, the lane task
//     that has waited longest, among the heads of the lanes of the groups
//     eligible at group level (vruntime <= the class's V), runs: the
//     oldest of the tasks that have had a slot, if any, else the oldest
//     new one. Only eligible groups: a group that has had its share waits,
//     so group shares hold. Otherwise EEVDF picks from the heaps, and when
//     they are empty (only lane tasks wait) the lane's oldest task runs.
//     Started tasks first: a task that gave its slot up in its first slice
//     (a Blocking call, or its thread descheduled past the slice end)
//     would otherwise go behind every task that arrived meanwhile, once per
//     Blocking call; with 100 tasks of 16 Blocking calls each on 2 slots,
//     the tasks that lost their slot most often waited 5-6 times longer
//     than the median (BenchmarkManyTasksTail, docs/performance.md,
//     "Starvation under a stream of new tasks"). It cannot starve new
//     tasks: the lane serves a task only within its first slice.
//  3. Its run time is charged to its vruntime and its group's as any other
//     (charge), so nice and group shares hold: a lane task takes its
//     slot time early, from its own credit, not on top of its share; one
//     that goes on past its slice has negative lag, which EEVDF makes it
//     repay.
//  4. A task the lane picked runs to the end of its first slice of run
//     time (sliceLeft), unless it ends or blocks first; later lane tasks
//     do not preempt it (first come, first served). Past it, it is an
//     ordinary EEVDF task.
//  5. A task that joins the lane while the lane would run it asks every
//     running fair task past its first slice (and every idle task) to come
//     to its next Checkpoint (preemptLane); the first to come hands its
//     slot over, the others find the lane empty and go on (yield), at the
//     cost of a lock each.
//  6. The budget, as the realtime throttle's: the tasks the lane picked
//     may use defaultLaneShare of the slot time of each lanePeriod. Once
//     it is used, the lane is closed until the period ends: small tasks
//     then wait while long tasks do, so a flood of small tasks takes no
//     more than the budget from the long ones.
//
// Cost: one lane step per group with queued small tasks at each pick.

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
	// lanePeriod and defaultLaneShare are the small-task lane's budget: the
	// tasks it picks may use 90% of the slot time of each 100 ms. The
	// budget is the knob between small-task latency and long-task
	// throughput under a flood of small tasks: the more the lane may take,
	// the less the long tasks keep. Below it, small tasks get what they ask
	// for at once; 90% covers streams that take up to 75% of the slot time
	// (TestSmallTaskStreamKeepsNiceShares; at 80% the 75% stream began to
	// queue) and leaves long tasks 10%, as the realtime throttle leaves
	// others 5%. A period of 100 ms rather than the realtime throttle's
	// second bounds how long a flood holds long tasks back to 90 ms.
	lanePeriod       = int64(100 * time.Millisecond)
	defaultLaneShare = 0.9
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
	name   string
	class  *classQueue
	tasks  eevdfQueue
	queued int // tasks in tasks' heaps
	active int // tasks active (queued or holding a slot)
	// lane is the group's small-task lane, two FIFOs through
	// Task.laneLink: laneRan for the tasks that have had a slot (back from
	// Blocking or a Checkpoint), served first, and lane for new ones;
	// laneLink links the groups with a non-empty lane
	// (classQueue.laneGroups).
	lane, laneRan list[Task]
	laneLink      link[groupNode]
}

func taskLaneLink(t *Task) *link[Task]            { return &t.laneLink }
func groupLaneLink(g *groupNode) *link[groupNode] { return &g.laneLink }

// classQueue holds the groups with active tasks of one class.
type classQueue struct {
	groups     eevdfQueue
	byName     map[string]*groupNode // active groups, and idle tracked ones
	queued     int                   // tasks queued in this class
	laneGroups list[groupNode]       // groups with lane tasks (fair class only)
}

// runQueue is the policy: which waiting task gets the next free slot.
type runQueue struct {
	queues    [numQueues]classQueue
	nwaiting  int     // waiting tasks (queued or parked): in the heaps and lanes
	slice     int64   // the scheduler's slice: the groups' requests, the lane's cap
	cpuClock  bool    // the lane counts thread CPU time (used)
	workers   int     // slots: the shares below are of workers x time
	laneShare float64 // the lane's budget, a share of each lanePeriod
	// The bandwidth period of realtime's throttle and idle's share, and the
	// lane's budget period.
	periodStart, laneStart int64
	periodUsed             [numQueues]int64
	laneUsed               int64 // slot time the lane's tasks used in the lane's period
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
		switch {
		case g == nil || g.weight == w:
		case g.active > 0:
			queued := g.heapIdx >= 0
			if queued {
				cq.groups.remove(&g.entity)
			}
			cq.groups.reweight(&g.entity, w)
			if queued {
				cq.groups.push(&g.entity)
			}
		default: // inactive: not in V; keep its lag in wall-clock terms
			g.lag = g.lag * g.weight / w
			g.weight = w
		}
	}
}

// groupWeight returns the weight of the named group.
func (q *runQueue) groupWeight(name string) int {
	if w, ok := q.tracked[name]; ok {
		return w
	}
	return DefaultGroupWeight
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
	slice := t.slice
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
	g := cq.byName[t.groupName]
	if g == nil {
		g = &groupNode{name: t.groupName, class: cq, tasks: newEEVDFQueue(), lane: list[Task]{at: taskLaneLink}, laneRan: list[Task]{at: taskLaneLink}}
		g.entity = entity{weight: groupWeight(q.groupWeight(t.groupName)), heapIdx: -1, group: g}
		cq.byName[t.groupName] = g
	}
	if g.active == 0 {
		cq.groups.activate(&g.entity, q.slice, scaleVirtual(q.slice, g.weight))
	}
	g.active++
	t.group = g
	// A new task starts with no lag (t.ent.lag is 0), as in the kernel.
	// It used to start one slice of credit ahead, so that its short first
	// request beat the deadlines of the tasks already waiting; the lane
	// does that job now, and the credit starved tasks under a steady
	// stream of new ones: with 100 tasks cycling through 2 slots in
	// IsolationOSPriority (10 ms slices, so 10 ms of credit each), a task
	// that had used its own credit lost to every newer task, and some
	// waited for seconds, until the stream stopped (docs/performance.md,
	// "Starvation under a stream of new tasks").
	req := requestSlice(t, first)
	g.tasks.activate(&t.ent, t.slice, scaleVirtual(req, t.ent.weight))
}

// deactivate makes t inactive (finished or blocking); its group goes
// when its last active task does. t must not be queued.
func (q *runQueue) deactivate(t *Task) {
	g := t.group
	g.tasks.deactivate(&t.ent)
	g.active--
	if g.active == 0 {
		g.class.groups.deactivate(&g.entity)
		if _, tracked := q.tracked[g.name]; !tracked {
			// Not tracked (see SetGroupWeight): free the node, and with it
			// the group's lag, so that memory does not grow with the
			// number of group names. A tracked group's node stays, so a
			// group that comes and goes with each task costs no
			// allocation and keeps its lag.
			delete(g.class.byName, g.name)
		}
	}
	t.group = nil
}

// enqueue queues active task t: in its group's lane if it is small,
// in the heaps otherwise.
func (q *runQueue) enqueue(t *Task) {
	g := t.group
	if q.small(t) {
		laneJoin(t)
	} else {
		g.tasks.push(&t.ent)
		g.queued++
		if g.heapIdx < 0 {
			g.class.groups.push(&g.entity)
		}
	}
	g.class.queued++
	q.nwaiting++
}

// dequeue takes queued task t out of the lane or the heaps; it stays
// active.
func (q *runQueue) dequeue(t *Task) {
	g := t.group
	if t.inLane {
		laneLeave(t)
	} else {
		g.tasks.remove(&t.ent)
		g.queued--
		if g.queued == 0 {
			g.class.groups.remove(&g.entity)
		}
	}
	g.class.queued--
	q.nwaiting--
}

// small reports whether t may use the lane: a Normal task in the fair
// queue that has used less than its lane slice. Batch is left out: it is
// throughput work that nobody waits on.
func (q *runQueue) small(t *Task) bool {
	return t.qidx == qFair && t.class() == ClassNormal && q.used(t) < q.laneSlice(t)
}

// used is how much of its first slice t has used, as the lane counts:
// its slot time, or with cpuClock (IsolationOSPriority) the CPU time its
// worker thread has spent on it. Slot time is wall-clock time holding a
// slot, and a SCHED_IDLE worker holds its slot while the kernel runs other
// threads: counted that way, tasks of 0.5 ms of CPU used more than the
// lane's 1 ms in 44% of runs (a throwaway test, 100 tasks on 2 slots)
// and, out of the lane, waited behind the stream of new ones.
func (q *runQueue) used(t *Task) int64 {
	if q.cpuClock {
		return t.cpuUsed
	}
	return t.runTime
}

// pastLane reports whether running task t is past its first slice, so
// that a new lane task may ask it for its slot: in slot time, counting the
// stretch since it was last charged, and with cpuClock, unless the lane
// gave it its slot and it was within its first slice of CPU time at its
// last charge.
func (q *runQueue) pastLane(t *Task, now int64) bool {
	if q.cpuClock && t.laneRun {
		return false
	}
	return t.runTime+now-t.since >= q.laneSlice(t)
}

// laneSlice is how much run time the lane serves t first: its slice, but
// no more than the scheduler's nor DefaultSlice, so that a long task new
// to the lane holds the lane's later tasks back for no more than 1 ms,
// whatever the slice (IsolationOSPriority's is 10 ms: docs/small-task-lane.md
// has what the cap changed) or a task's own (WithTaskSlice).
func (q *runQueue) laneSlice(t *Task) int64 {
	return min(t.slice, q.slice, int64(DefaultSlice))
}

// laneJoin appends queued task t to its group's lane: to the part for
// tasks that have run if it has, else to the part for new ones.
func laneJoin(t *Task) {
	g := t.group
	if g.lane.head == nil && g.laneRan.head == nil {
		g.class.laneGroups.pushBack(g)
	}
	g.laneOf(t).pushBack(t)
	t.inLane = true
}

// laneLeave takes t out of its group's lane.
func laneLeave(t *Task) {
	g := t.group
	g.laneOf(t).remove(t)
	t.inLane = false
	if g.lane.head == nil && g.laneRan.head == nil {
		g.class.laneGroups.remove(g)
	}
}

// laneOf is the part of g's lane that t joins: t.started cannot change
// while t is queued.
func (g *groupNode) laneOf(t *Task) *list[Task] {
	if t.started {
		return &g.laneRan
	}
	return &g.lane
}

// rollLane starts a new lane budget period when the current one is over.
func (q *runQueue) rollLane(now int64) {
	if now-q.laneStart >= lanePeriod {
		q.laneStart = now
		q.laneUsed = 0
	}
}

// laneOpen reports whether the lane has budget left in this period.
func (q *runQueue) laneOpen(now int64) bool {
	q.rollLane(now)
	return float64(q.laneUsed) < q.laneShare*float64(lanePeriod)*float64(q.workers)
}

// lanePeek returns the task the lane would run next while other tasks
// wait, or nil when the lane is closed or none of its groups is eligible.
func (q *runQueue) lanePeek(now int64) *Task {
	cq := &q.queues[qFair]
	if cq.laneGroups.head == nil || !q.laneOpen(now) {
		return nil
	}
	return cq.laneOldest(true)
}

// laneOldest returns the lane task that has waited longest among the heads
// of the groups' lanes, of the groups eligible at group level (their
// vruntime <= V) only if eligibleOnly. It costs one step per group with
// lane tasks.
func (cq *classQueue) laneOldest(eligibleOnly bool) *Task {
	v := cq.groups.V()
	var oldest, oldestNew *Task
	for g := cq.laneGroups.head; g != nil; g = g.laneLink.next {
		if eligibleOnly && g.vruntime > v {
			continue // the group has had its share
		}
		if h := g.laneRan.head; h != nil && (oldest == nil || h.since < oldest.since) {
			oldest = h
		}
		if h := g.lane.head; h != nil && (oldestNew == nil || h.since < oldestNew.since) {
			oldestNew = h
		}
	}
	if oldest == nil {
		return oldestNew
	}
	return oldest
}

// charge charges delta of run time, ending at now, to t at every level,
// and to the lane's budget if the lane gave t its slot; it reports whether
// it did.
func (q *runQueue) charge(t *Task, delta, now int64) (lane bool) {
	g := t.group
	if g.tasks.account(&t.ent, delta) {
		// The request is used up, in one stretch or in pieces between
		// preemptions: ask for a new one (a new deadline).
		g.tasks.renew(&t.ent, scaleVirtual(requestSlice(t, false), t.ent.weight))
	}
	if g.class.groups.account(&g.entity, delta) {
		g.class.groups.renew(&g.entity, scaleVirtual(q.slice, g.weight))
	}
	lane = t.laneRun
	if lane {
		q.rollLane(now)
		q.laneUsed += delta
		t.laneRun = q.used(t) < q.laneSlice(t)
	}
	q.rollPeriod(now)
	q.periodUsed[t.qidx] += delta
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
	if cq[qExit].queued > 0 {
		return qExit
	}
	q.rollPeriod(now)
	others := cq[qFair].queued + cq[qIdle].queued
	if cq[qIdle].queued > 0 && q.idleStarved(now) {
		return qIdle
	}
	if cq[qRealtime].queued > 0 && (others == 0 || !q.rtThrottled()) {
		return qRealtime
	}
	if cq[qFair].queued > 0 {
		return qFair
	}
	return qIdle
}

// pick removes and returns the task that should run next, or nil.
func (q *runQueue) pick(now int64) *Task {
	qi := q.pickQueue(now)
	if qi < 0 {
		return nil
	}
	cq := &q.queues[qi]
	if qi == qFair {
		t := q.lanePeek(now)
		if t == nil && !cq.groups.queued() {
			t = cq.laneOldest(false) // only lane tasks wait
		}
		if t != nil {
			q.dequeue(t)
			t.laneRun = true
			return t
		}
	}
	ge := cq.groups.peek()
	g := ge.group
	t := g.tasks.peek().task
	q.dequeue(t)
	t.laneRun = false
	return t
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
	if t.laneRun {
		left = q.laneSlice(t) - q.used(t) // the lane serves the first slice
	}
	return max(left, int64(minSlice))
}
