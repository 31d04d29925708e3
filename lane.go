package cpusched

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
// beat the long tasks' deadlines, which got next to none of the slot time
// (docs/measurements/small-task-lane.md).
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
//  1. A waiting Normal task that has used less than its slice (small; the
//     slice counts up to the scheduler's and to DefaultSlice, laneSlice;
//     used is slot time, or in IsolationOSPriority the CPU time of the
//     task's thread, see used) waits in its group's lane instead of
//     the EEVDF heaps. It stays active, so its vruntime counts in V as any
//     other's. The fair class keeps the groups with a non-empty lane in a
//     list. The lane is two FIFOs: tasks that have had a slot (back from
//     Blocking or a Checkpoint), then new ones. Not the tasks of a kind
//     whose tasks run past their slices in their group (overruns, the
//     kind's estimate: runqueue.go, kind.go): a task that does not come
//     to a Checkpoint holds the slot the lane gave it for all its length,
//     not the first slice the lane serves, and spends the lane's budget,
//     so those wait in the heaps from the start, as the long tasks they
//     likely are; one that joined before its kind was known leaves the
//     lane at its head (demote).
//  2. When a fair task is to be picked and the lane is open, the lane task
//     that has waited longest, among the heads of the lanes of the groups
//     eligible at group level (vruntime <= the class's V), runs: the
//     oldest of the tasks that have had a slot, if any, else the oldest
//     new one. Only eligible groups: a group that has had its share waits,
//     so group shares hold. Otherwise EEVDF picks the group (a group whose
//     waiting tasks are all in its lane is in the group heaps as any
//     other), and in it the task its heaps give, or its lane's head when
//     only lane tasks wait in it. (When only lane tasks waited, the
//     lane's oldest task of any group used to run: tasks that never come
//     to a Checkpoint always wait as new ones, in the lane, so groups of
//     such tasks were served in the order their tasks came, whatever
//     their weights: a group weighing 4.8% got 21% on one slot and 31%
//     on two.)
//     Started tasks first: a task that gave its slot up in its first slice
//     (a Blocking call, or its thread descheduled past the slice end)
//     would otherwise go behind every task that arrived meanwhile, once per
//     Blocking call; with 100 tasks of 16 Blocking calls each on 2 slots,
//     the tasks that lost their slot most often waited 5-6 times longer
//     than the median (BenchmarkManyTasksTail;
// docs/measurements/small-task-lane.md#starvation-under-a-stream-of-new-tasks).
//     It cannot starve new tasks: the lane serves a task only within its
//     first slice.
//  3. Its run time is charged to its vruntime and its group's as any other
//     (charge), so nice and group shares hold: a lane task takes its
//     slot time early, from its own credit, not on top of its share; one
//     that goes on past its slice has negative lag, which EEVDF makes it
//     repay, or its group if it ends first (eevdf.go: depart, leave).
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
// Cost: one lane step per group with waiting small tasks at each pick.

import "time"

const (
	// lanePeriod and defaultLaneShare are the small-task lane's budget: the
	// tasks it picks may use 90% of the slot time of each 100 ms. The budget
	// is the knob between small-task latency and long-task throughput under
	// a flood of small tasks: the more the lane may take, the less the long
	// tasks keep. Below it, small tasks get what they ask for at once; 90%
	// covers the streams of small tasks that
	// TestSmallTaskStreamKeepsNiceShares drives (a lower share began to
	// queue them, docs/measurements/small-task-lane.md) and leaves long
	// tasks 10%, as the realtime throttle leaves others 5%. A period of 100
	// ms rather than the realtime throttle's second bounds how long a flood
	// holds long tasks back to 90 ms.
	lanePeriod       = int64(100 * time.Millisecond)
	defaultLaneShare = 0.9
)

func taskLaneLink(t *Task) *link[Task]            { return &t.laneLink }
func groupLaneLink(g *groupNode) *link[groupNode] { return &g.laneLink }

// small reports whether t may use the lane: a Normal task in the fair
// queue that has used less than its lane slice, of a kind whose tasks in
// its group come to the scheduler near their slices' ends (not overruns). Batch is
// left out: it is throughput work that nobody waits on.
func (q *runQueue) small(t *Task) bool {
	return t.qidx == qFair && t.class() == ClassNormal && q.used(t) < q.laneSlice(t) && !q.overruns(t)
}

// used is how much of its first slice t has used, as the lane counts:
// its slot time, or with cpuClock (IsolationOSPriority) the CPU time its
// thread has spent on it. Slot time is wall-clock time holding a
// slot, and a task on a SCHED_IDLE thread holds its slot while the
// kernel runs other threads: counted that way, tasks of half the lane's
// slice of CPU often used more than the whole slice and, out of the lane,
// waited behind the stream of new ones (docs/measurements/small-task-lane.md).
func (q *runQueue) used(t *Task) int64 {
	if q.cpuClock {
		return t.laneCPU()
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

// laneSlice is how much run time the lane serves t first: its slice, but no
// more than the scheduler's nor DefaultSlice, so that a long task new to the
// lane holds the lane's later tasks back for no more than 1 ms, whatever the
// slice (IsolationOSPriority's is 10 ms:
// docs/measurements/small-task-lane.md has what the cap changed) or a task's
// own (WithTaskSlice).
func (q *runQueue) laneSlice(t *Task) int64 {
	return min(int64(t.slice), q.slice, int64(DefaultSlice))
}

// laneJoin appends waiting task t to its group's lane: to the part for
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
// while t is waiting.
func (g *groupNode) laneOf(t *Task) *list[Task] {
	if t.started {
		return &g.laneRan
	}
	return &g.lane
}

// laneHead is the task g's lane serves first: the oldest that has had a
// slot, else the oldest new one.
func (g *groupNode) laneHead() *Task {
	if g.laneRan.head != nil {
		return g.laneRan.head
	}
	return g.lane.head
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
// wait, or nil when the lane is closed or none of its groups is eligible:
// the lane task that has waited longest among the heads of the lanes of
// the groups eligible at group level (their vruntime <= V), the tasks
// that have had a slot first. It costs one step per group with lane
// tasks. A new task at the head of its group's lane whose kind has since
// turned out to run past its slices goes to the heaps first (demote).
func (q *runQueue) lanePeek(now int64) *Task {
	cq := &q.queues[qFair]
	if cq.laneGroups.head == nil || !q.laneOpen(now) {
		return nil
	}
	v := cq.groups.V()
	var oldest, oldestNew *Task
	for g, next := cq.laneGroups.head, (*groupNode)(nil); g != nil; g = next {
		next = g.laneLink.next
		for h := g.lane.head; h != nil && q.overruns(h); h = g.lane.head {
			q.demote(h)
		}
		if g.vruntime > v {
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

// demote moves t, a new task at the head of its group's lane, to its
// group's heaps, placed as activate places a new task of a kind that runs
// past its slices (longRequest).
// The lane took it for small when it arrived, before the estimate of its
// kind said otherwise: a kind is learned as its tasks come to the
// scheduler, and a call that cannot yield comes once, at its end. Tasks of
// such a kind that arrived before the first one ended (a service's first
// requests; a route whose requests changed) would otherwise wait in the
// lane, first come first served, ahead of the small tasks that came after
// them, and each would hold the slot the lane gave it, and the lane's
// budget, for the whole call: in the bench's neighbor-nockpt step the
// small requests waited seconds behind them
// (docs/measurements/work-that-cannot-yield.md#kinds-of-work).
func (q *runQueue) demote(t *Task) {
	laneLeave(t)
	g := t.group
	g.tasks.renew(&t.ent, scaleVirtual(longRequest(t), t.ent.weight))
	g.tasks.push(&t.ent)
	g.inHeaps++
}
