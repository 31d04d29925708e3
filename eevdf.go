package cpusched

// This file holds the EEVDF arithmetic shared by both levels of the run
// queue: tasks inside a group, and groups inside a class.
//
// Vocabulary (as in the kernel's kernel/sched/fair.c):
//   - weight: how much CPU an entity is owed relative to the others; a task's
//     comes from its nice level, a group's from its cpu.weight-like setting.
//   - vruntime: the entity's run time scaled by nice0Weight/weight, so that
//     entities that got their fair share have equal vruntimes.
//   - V: the queue's virtual time, the weighted average of the vruntimes
//     of its active entities, as the kernel's avg_vruntime: the vruntime an
//     entity would have had it got exactly its share. Running for delta
//     moves V by delta*nice0Weight/sum(weights) (the EEVDF paper's dV/dt =
//     1/sum(w)); entities joining or leaving move it too, which is what
//     makes the lag of all active entities sum to zero.
//   - lag: V - vruntime, the service an entity is owed (positive) or has
//     had in advance (negative). An entity is eligible when its lag >= 0.
//   - request: the slice an entity asks for; its virtual deadline is
//     vruntime + request*nice0Weight/weight. EEVDF runs the eligible entity
//     with the earliest deadline, so a short request means an earlier
//     deadline (lower latency), not more CPU. When the entity's vruntime
//     reaches its deadline, the request is used up and a new deadline is set
//     (as the kernel's update_deadline), however the run time came: in one
//     stretch or in pieces between preemptions.
//
// An entity is active while it is waiting or running; only waiting entities
// are in the heaps. When it stops being active (a group whose last task
// left, a task that went into Blocking) its lag is kept, clamped, and it
// is placed back so that it has that lag again once it is counted in V
// (place): a task that slept cannot bank unlimited credit. A task that
// ended leaves its lag to its group's next new task instead (below).
//
// Debt is not clamped away. Run time reaches the policy when a task comes
// to the scheduler, so a task that runs 40 ms without a Checkpoint is
// charged 40 ms at once, as it ends, and its entity and its group's leave
// deep in debt. Clamped to two slices as they left, that debt was
// forgiven: a group whose queue emptied between such tasks got 2-3x its
// share. So an entity that leaves in debt stays counted in V until V has
// caught up with it: a tracked group, delayed (leave), as the kernel's
// delayed dequeue; a task, as a departure of its own (depart), since its
// Task may be reused. Either way the debt is paid by the others
// running, whether the entity is away or back; a group's, never beyond
// maxGroupDebt. Others do the same: the kernel's EEVDF found that lag
// "should not be carried around indefinitely" nor "instantly
// discarded", which lets a task game the system by sleeping at the end of
// its quantum, hence DELAY_DEQUEUE (Linux 6.12); CockroachDB's tenant
// token buckets charge CPU after the fact, which "can put the bucket in
// debt, which will need to be paid" before more work is admitted, while
// unused tokens stop accumulating at a limit; TiKV's resource groups keep
// a virtual time each, which stays ahead for a group that used more, while
// a group left behind is pulled halfway up to the others at each update.
//
// Nor is a task's credit given away as it ends. A task ends with credit
// when it waited longer than it ran, as a short one does behind long ones
// whose run time reaches V all at once, as they end. Given to the others,
// as it was, the credit raised their lag, and a client of short calls
// lost at each call what a client of long ones kept as debt: in one
// group, clients of 10 ms calls got about half the CPU time of clients
// of 100 ms ones, of 2 ms a quarter of 40 ms ones'. So a task that ends
// leaves its debt or credit to its group's next new task (depart,
// adopt), which a client that keeps one task in flight submits as its
// last ends: each such client goes on as one entity, and clients share
// by time whatever their calls' lengths. The credit fades as V moves, as
// the debt is paid, so a client that goes away banks neither for long.
//
// Why V must be the average. An earlier version kept V as a clock that only
// moved with run time: an entity joining with credit (a new task starts a
// slice ahead) then added to the total lag for good, since nothing charged
// it back, and after many arrivals the waiting entities had piled up lag
// (up to the clamp), so their deadlines beat those of new short requests.
// With V as the average, credit given to one entity is paid by the others.
//
// The eligible set is kept as two heaps: ready (by deadline) and later (by
// vruntime). V can go back when an entity with credit joins, so at pick
// time ready's top is moved back to later while it is not eligible, and
// later's top to ready while it is; then ready's top is the eligible entity
// with the earliest deadline (the heaps may hold others in the wrong heap
// below their tops, which does not change the answer).

import "time"

const nice0Weight = 1024

// niceWeights is the kernel's sched_prio_to_weight table (kernel/sched/core.c):
// nice 0 is 1024 and each step is about x1.25, so that a task one nice level
// lower gets about 10% more CPU than one level higher. Index = nice + 20.
var niceWeights = [40]int64{
	/* -20 */ 88761, 71755, 56483, 46273, 36291,
	/* -15 */ 29154, 23254, 18705, 14949, 11916,
	/* -10 */ 9548, 7620, 6100, 4904, 3906,
	/*  -5 */ 3121, 2501, 1991, 1586, 1277,
	/*   0 */ 1024, 820, 655, 526, 423,
	/*   5 */ 335, 272, 215, 172, 137,
	/*  10 */ 110, 87, 70, 56, 45,
	/*  15 */ 36, 29, 23, 18, 15,
}

func niceWeight(nice int) int64 { return niceWeights[nice+20] }

// groupWeight converts a cgroup-style weight (1..10000, default 100) to the
// scale of task weights, so that the default group weighs as a nice-0 task.
func groupWeight(w int) int64 { return int64(w) * nice0Weight / DefaultGroupWeight }

// lagClampSlices bounds the lag an inactive entity keeps to this many of
// its slices. Two slices: a task back from a long Blocking call gets at
// most two slices of credit, enough to run first but not to shut the
// others out. It bounds debt too, but an entity leaves in debt only when
// nobody else competes: otherwise it stays in V until it has paid (leave,
// depart). A task that ends leaves its credit unclamped to the next new
// task, bounded by maxGroupDebt as a debt is, since it fades as V moves
// (depart); and a group that comes straight back, before V has moved one
// of its slices, keeps the credit it left with, up to the same bound
// (runQueue.activate): it was waiting, not idle.
const lagClampSlices = 2

// maxGroupDebt bounds how far a group may run ahead of its share, in its
// own run time: the debt it owes the others (its negative lag) is forgiven
// past it. Work that does not come to a Checkpoint is charged when it
// does, all at once, and a group with tasks of 40-100 ms on several slots
// owes a few hundred ms of run time by then; 2 s pays that back in full,
// with a margin for groups holding many slots. The bound is for the task
// that runs for minutes without a Checkpoint: its group would otherwise be
// shut out for minutes times the total weight over its own.
const maxGroupDebt = int64(2 * time.Second)

// entity is the EEVDF state of a task or a group.
type entity struct {
	weight   int64
	vruntime int64
	deadline int64
	vrequest int64 // the current request, scaled: deadline - vruntime when it was set
	lag      int64 // kept while inactive
	heapIdx  int32 // index in ready, later or delayed; -1 when in none
	inReady  bool
	delayed  bool // in V with nothing to run, until its debt is paid (leave)
	// kind is the owner task's kind slot (kind.go): the Task's, kept here
	// in what would be padding, so that a Task stays in its size class.
	kind  uint8
	task  *Task      // the owner, when a task
	group *groupNode // the owner, when a group
}

// departure is what a task that departed left in its queue (depart)
// until V reaches at or a new task takes it over (adopt): a debt, its
// weight and vruntime (at) counted in V; or, from a task that ended, a
// credit of at - V, not counted in V.
type departure struct {
	weight, at int64
	credit     bool
}

func scaleVirtual(d, weight int64) int64 {
	if weight <= 0 {
		return d
	}
	return d * nice0Weight / weight
}

// eevdfQueue orders the entities of one level.
//
// V is kept as base + weightedSum/weightSum, where weightedSum is the sum
// of weight*(vruntime-base) over the active entities (the kernel's
// avg_vruntime, with base as its zero point): each term is bounded by the
// lag clamp and a request, so base follows V (rebase) to keep the sum far
// from overflowing.
type eevdfQueue struct {
	base        int64
	weightedSum int64 // of weight*(vruntime-base), active entities
	weightSum   int64 // of active entities
	idleV       int64 // V when the last active entity left
	ready       entityHeap
	later       entityHeap
	// delayed holds the entities that left in debt and stay counted in V
	// until they have paid it (leave), by vruntime; delayedWeight is
	// their weight, part of weightSum.
	delayed       entityHeap
	delayedWeight int64
	// departed are the debts and credits departed tasks left (depart),
	// in the order they departed; debtWeight is the debts' weight, part
	// of weightSum, and departedMin at most their least at (settle).
	departed                []departure
	debtWeight, departedMin int64
}

func newEEVDFQueue() eevdfQueue {
	return eevdfQueue{ready: entityHeap{byDeadline: true}}
}

// V returns the queue's virtual time.
func (q *eevdfQueue) V() int64 {
	if q.weightSum == 0 {
		return q.idleV
	}
	// Floor division, so that V never exceeds the vruntime of a lone entity.
	return q.base + floorDiv(q.weightedSum, q.weightSum)
}

func floorDiv(a, b int64) int64 {
	d := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		d--
	}
	return d
}

// rebaseAt bounds how far base may fall behind V, in virtual ns, before
// the sum is moved: weights are at most about 1e5 (group weight 10000), so
// terms stay below 1e5*(1e9 + lag clamp + request) and thousands of them
// below the int64 range.
const rebaseAt = int64(1e9)

// add counts e, at its current vruntime, in V.
func (q *eevdfQueue) add(e *entity) {
	if q.weightSum == 0 {
		q.base, q.weightedSum = q.idleV, 0
	}
	q.weightSum += e.weight
	q.weightedSum += e.weight * (e.vruntime - q.base)
}

// sub takes e out of V.
func (q *eevdfQueue) sub(e *entity) { q.subTerm(e.weight, e.vruntime) }

// subTerm takes the term of weight at vruntime out of V.
func (q *eevdfQueue) subTerm(weight, vruntime int64) {
	v := q.V()
	q.weightSum -= weight
	q.weightedSum -= weight * (vruntime - q.base)
	if q.weightSum == 0 {
		q.idleV = v
	}
}

// activate makes e active with its kept lag, clamped to lagClampSlices of
// slice, and a request of vrequest (scaled).
//
// Placement is the kernel's place_entity: joining at V - lag would pull V
// back by lag*w/(W+w) and leave e with only lag*W/(W+w), so e is placed at
// V - lag*(W+w)/W, which leaves it exactly lag once it is counted.
func (q *eevdfQueue) activate(e *entity, slice int64, vrequest int64) {
	q.activateWithin(e, lagClampSlices*scaleVirtual(slice, e.weight), vrequest)
}

// activateWithin is activate with the kept lag clamped to limit (scaled).
func (q *eevdfQueue) activateWithin(e *entity, limit, vrequest int64) {
	q.place(e, min(max(e.lag, -limit), limit), vrequest)
}

// place makes e active with a lag of lag and a request of vrequest.
func (q *eevdfQueue) place(e *entity, lag int64, vrequest int64) {
	if q.weightSum > 0 {
		lag = lag * (q.weightSum + e.weight) / q.weightSum
	} else {
		lag = 0 // alone: V is its own vruntime, lag means nothing
	}
	e.vruntime = q.V() - lag
	e.vrequest = vrequest
	e.deadline = e.vruntime + vrequest
	e.lag = 0
	q.add(e)
}

// deactivate makes e inactive and keeps its lag. e must not be in a heap.
func (q *eevdfQueue) deactivate(e *entity) {
	e.lag = q.V() - e.vruntime
	q.sub(e)
}

// competing returns the weight of the active entities that can run: not
// delayed, not departed.
func (q *eevdfQueue) competing() int64 {
	return q.weightSum - q.delayedWeight - q.debtWeight
}

// leave is deactivate for an entity whose state is kept while it is away
// (a tracked group): with debt (negative lag) while others compete, e
// stays counted in V, delayed, with nothing to run, until V has caught up
// with its vruntime (settle), as the kernel's delayed dequeue
// (DELAY_DEQUEUE, Linux 6.12). e must not be in a heap.
//
// Why not keep the debt as lag and place e with it when it comes back:
// lag is owed against the others' progress, and e's idle time is part of
// how the others get ahead. Kept as lag, the debt would wait unpaid
// through any pause and be charged again on return. Clamped as credit is
// (lagClampSlices), it would be forgiven: a group whose tasks end in debt
// and that pauses between them would leave its debt behind each time
// (2-3x its share, pausing 0-200 ms between 40 ms tasks). Delayed, the
// debt is paid by the others running while e is away, and a task that
// arrives meanwhile finds its entity still in V, debt and all (undelay).
func (q *eevdfQueue) leave(e *entity) {
	if q.competing() <= e.weight || e.vruntime <= q.V() { // alone, or no debt
		q.deactivate(e)
		return
	}
	e.delayed = true
	q.delayedWeight += e.weight
	q.delayed.push(e)
}

// undelay makes delayed entity e active again, where it is: its debt is
// still owed.
func (q *eevdfQueue) undelay(e *entity) {
	q.delayed.remove(e)
	e.delayed = false
	q.delayedWeight -= e.weight
}

// depart is deactivate for an entity whose state is not kept while it is
// away: a task that ended (its Task may be reused) or went into Blocking.
// With debt while others compete, e's weight and vruntime stay counted in
// V, as a departure, until V has caught up with it (settle) or a new
// task takes it over (adopt), and e leaves level (no lag). A task that
// ran 40 ms without a Checkpoint and ended would otherwise take its debt
// with it, and the next task of the same client, placed at V, would run
// as if the first had never been: in a group of two clients whose tasks
// do not yield and two whose tasks do, the first two took all but 2.4 ms
// of the group's 3.8 s in 20 s on one slot (420 ms with the debt kept
// in V, 900 ms now that a new task takes it over).
//
// Each debt is kept apart, and leaves V when V reaches it. Merged into
// one entity, as they were, the debts left only once V reached their
// average, which tasks that kept ending in debt kept ahead of V: the
// merged weight grew with every task that ended, and V, the average of
// it and the active tasks', moved ever more slowly (adopt says what that
// did to the picks).
//
// Kept apart from e, the debt is no longer its entity's: that is why
// groups, whose debt must stay theirs when they come back (leave), are
// delayed instead.
//
// A task that ended (ended) with credit leaves it too, out of V, for the
// next new task (adopt): it fades as V moves, as a debt is paid, and is
// gone once V has moved that far (settle). The file comment says why. A
// task that went into Blocking keeps its credit, clamped (activate), as
// it comes back itself.
func (q *eevdfQueue) depart(e *entity, ended bool) {
	v := q.V()
	switch {
	case q.competing() <= e.weight || e.vruntime == v || e.vruntime < v && !ended:
		q.deactivate(e) // alone, level, or back itself with its credit
	case e.vruntime > v:
		q.debtWeight += e.weight
		q.keep(departure{weight: e.weight, at: e.vruntime})
		e.lag = 0
	default:
		q.deactivate(e)
		q.keep(departure{weight: e.weight, at: q.V() + e.lag, credit: true})
		e.lag = 0
	}
}

// keep appends d to the departed.
func (q *eevdfQueue) keep(d departure) {
	if len(q.departed) == 0 || d.at < q.departedMin {
		q.departedMin = d.at
	}
	q.departed = append(q.departed, d)
}

// adopt makes new task e active, as activate does, but with the debt or
// credit of the task that departed last (depart), if one is left: a debt
// leaves V, and e starts that far behind V, a credit that far ahead (at
// most limit of e's run time either way; the rest is forgiven, as
// maxGroupDebt says). It reports whether there was one to take.
//
// Why a new task takes it: a client that keeps one task in flight submits
// its next task as its last ends, so the debt that departed last is most
// likely its own, and taken over, it is paid by that client, as the
// kernel's task that wakes while delayed (DELAY_DEQUEUE) pays its own.
// Left in V, it is paid by everyone: it raises V, the other tasks that
// wait are owed more, and the new task starts level at V. Its deadline,
// V plus its request, then beats those of tasks that waited but asked for
// more (a group's tasks ask for as long as they run past their slices:
// noteOverrun), so that clients whose tasks run long without a
// Checkpoint got a fraction of the CPU time of clients of shorter ones in
// the same group (docs/design.md has the figures). Taken over, each
// client is an entity whose vruntime goes on from task to task, and
// clients share by time, whatever their tasks' length, once credit goes
// on as debt does (depart). Which debt or credit a task takes does not
// change its group's, only which of the group's tasks pays or gets it.
func (q *eevdfQueue) adopt(e *entity, limit, vrequest int64) bool {
	n := len(q.departed)
	if n == 0 {
		return false
	}
	d := q.departed[n-1]
	q.departed = q.departed[:n-1]
	v := q.V()
	lag := max(d.at-v, 0) // the credit left
	if !d.credit {
		lag = min(v-d.at, 0)
		q.debtWeight -= d.weight
		q.subTerm(d.weight, d.at)
	}
	limit = scaleVirtual(limit, e.weight)
	q.place(e, min(max(lag*d.weight/e.weight, -limit), limit), vrequest)
	return true
}

// settle takes out of V the delayed entities and departed debts whose
// vruntime V has reached (their debt is paid: they leave with a lag >=
// 0), and drops the departed credits V has reached (faded); once no
// entity that can run is left, all of them, level: there is nobody left
// to owe.
func (q *eevdfQueue) settle() {
	alone := q.competing() == 0
	for len(q.delayed.items) > 0 && (alone || q.delayed.items[0].vruntime <= q.V()) {
		e := q.delayed.items[0]
		q.undelay(e)
		q.deactivate(e)
		if alone {
			e.lag = 0
		}
	}
	// The departed are kept in the order they departed, for adopt, so
	// finding those V has reached takes a pass over them: only once V
	// reaches departedMin, and one reached is gone after it. Taking paid
	// debts out moves V up, which may pay others: pass again until none
	// is.
	for len(q.departed) > 0 && (alone || q.departedMin <= q.V()) {
		v, kept := q.V(), q.departed[:0]
		q.departedMin = v
		for _, d := range q.departed {
			if alone || d.at <= v {
				if !d.credit {
					q.debtWeight -= d.weight
					q.subTerm(d.weight, d.at)
				}
				continue
			}
			if len(kept) == 0 || d.at < q.departedMin {
				q.departedMin = d.at
			}
			kept = append(kept, d)
		}
		clear(q.departed[len(kept):])
		q.departed = kept
	}
}

// boundDebt caps how far active entity e may run ahead of V: at most
// limit (virtual), by forgiving the rest (maxGroupDebt says why).
func (q *eevdfQueue) boundDebt(e *entity, limit int64) {
	others := q.weightSum - e.weight
	if others <= 0 {
		return // alone: V is its vruntime
	}
	over := e.vruntime - q.V() - limit
	if over <= 0 {
		return
	}
	// Moving e back by x moves V back by x*w/W: x = over*W/others leaves
	// e exactly limit ahead.
	x := over * q.weightSum / others
	e.vruntime -= x
	e.deadline -= x
	q.weightedSum -= e.weight * x
	if e.heapIdx >= 0 {
		q.fix(e)
	}
}

// reweight changes active entity e's weight, keeping its lag and the
// virtual time left to its deadline in wall-clock terms, as the kernel's
// reweight_entity. e must not be in a heap.
func (q *eevdfQueue) reweight(e *entity, weight int64) {
	v := q.V()
	lag := (v - e.vruntime) * e.weight / weight
	left := (e.deadline - e.vruntime) * e.weight / weight
	q.sub(e)
	if e.delayed {
		q.delayedWeight += weight - e.weight
	}
	e.vrequest = e.vrequest * e.weight / weight
	e.weight = weight
	e.vruntime = v - lag
	e.deadline = e.vruntime + left
	q.add(e)
	if e.delayed {
		q.delayed.fix(e)
	}
}

// account charges delta nanoseconds of run time to active entity e. It
// reports whether e's vruntime reached its deadline; the caller then gives
// it a new request (renew).
func (q *eevdfQueue) account(e *entity, delta int64) (requestDone bool) {
	dv := scaleVirtual(delta, e.weight)
	e.vruntime += dv
	q.weightedSum += e.weight * dv
	if q.weightSum > 0 && q.weightedSum > rebaseAt*q.weightSum {
		// Move base up to V (rebaseAt); the terms shrink by weight*rebaseAt.
		q.base += rebaseAt
		q.weightedSum -= rebaseAt * q.weightSum
	}
	if e.heapIdx >= 0 {
		q.fix(e)
	}
	return e.vruntime >= e.deadline
}

// renew gives active entity e a new request of vrequest (scaled) from its
// current vruntime.
func (q *eevdfQueue) renew(e *entity, vrequest int64) {
	e.vrequest = vrequest
	e.deadline = e.vruntime + vrequest
	if e.heapIdx >= 0 {
		q.fix(e)
	}
}

// fix restores the heap order after e's vruntime or deadline changed.
func (q *eevdfQueue) fix(e *entity) {
	if e.delayed {
		q.delayed.fix(e)
	} else if e.inReady {
		q.ready.fix(e)
	} else {
		q.later.fix(e)
	}
}

// push queues active entity e.
func (q *eevdfQueue) push(e *entity) {
	if e.vruntime <= q.V() {
		e.inReady = true
		q.ready.push(e)
	} else {
		e.inReady = false
		q.later.push(e)
	}
}

// remove takes waiting entity e out of its heap.
func (q *eevdfQueue) remove(e *entity) {
	if e.inReady {
		q.ready.remove(e)
	} else {
		q.later.remove(e)
	}
}

// peek returns the entity EEVDF would run next, or nil: the eligible one with
// the earliest deadline, or, if none is eligible, the one with the least
// vruntime (the closest to eligible; with V the average of the active
// entities, one always is unless the others are running).
func (q *eevdfQueue) peek() *entity {
	v := q.V()
	for len(q.ready.items) > 0 && q.ready.items[0].vruntime > v {
		e := q.ready.pop()
		e.inReady = false
		q.later.push(e)
	}
	for len(q.later.items) > 0 && q.later.items[0].vruntime <= v {
		e := q.later.pop()
		e.inReady = true
		q.ready.push(e)
	}
	if len(q.ready.items) > 0 {
		return q.ready.items[0]
	}
	if len(q.later.items) > 0 {
		return q.later.items[0]
	}
	return nil
}
