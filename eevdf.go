package cpusched

// This file holds the EEVDF arithmetic shared by both levels of the run
// queue: tasks inside a group, and groups inside a class.
//
// Vocabulary (as in the kernel's kernel/sched/fair.c):
//   - weight: how much CPU an entity is owed relative to the others; a task's
//     comes from its nice level, a group's from its cpu.weight-like setting.
//   - vruntime: the entity's run time scaled by nice0Weight/weight, so that
//     entities that got their fair share have equal vruntimes.
//   - V (vclock): the queue's virtual time. It advances by
//     delta*nice0Weight/sum(weights of active entities) whenever an active
//     entity runs for delta: the vruntime an entity would have had it got
//     exactly its share (the EEVDF paper's V(t), dV/dt = 1/sum(w)).
//   - lag: V - vruntime, the service an entity is owed (positive) or has
//     had in advance (negative). An entity is eligible when its lag >= 0.
//   - virtual deadline: vruntime + slice*nice0Weight/weight, set when the
//     entity asks for a new slice. EEVDF runs the eligible entity with the
//     earliest deadline, so a short slice means an earlier deadline (lower
//     latency), not more CPU.
//
// An entity is active while it is queued or running; only queued entities
// are in the heaps. When it stops being active (it finished, or went into
// Blocking) its lag is kept, clamped, and it is placed at V - lag when it
// comes back: a task that slept cannot bank unlimited credit, and one that
// ran ahead cannot be punished for longer than the clamp.
//
// The eligible set is kept as two heaps: ready (eligible, by deadline) and
// later (not yet eligible, by vruntime). V only grows, so entities move only
// from later to ready, at pick time. An entity whose vruntime grows while it
// sits in ready (a group whose other task is running) stays there until it
// is picked; that is the one place we trade exactness for O(log n).

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

// lagClampSlices bounds an entity's lag to this many of its slices either
// way. Two slices, as design.md asks: a task back from a long Blocking call
// gets at most two slices of credit, enough to run first but not to shut the
// others out.
const lagClampSlices = 2

// entity is the EEVDF state of a task or a group.
type entity struct {
	weight   int64
	vruntime int64
	deadline int64
	lag      int64 // kept while inactive
	heapIdx  int32 // index in ready or later; -1 when in neither
	inReady  bool
	task     *Task      // the owner, when a task
	group    *groupNode // the owner, when a group
}

func scaleVirtual(d, weight int64) int64 {
	if weight <= 0 {
		return d
	}
	return d * nice0Weight / weight
}

// eevdfQueue orders the entities of one level.
type eevdfQueue struct {
	vclock    int64
	weightSum int64 // of active entities
	ready     entityHeap
	later     entityHeap
}

func newEEVDFQueue() eevdfQueue {
	return eevdfQueue{ready: entityHeap{byDeadline: true}}
}

// activate makes e active: placed at V minus its kept lag (clamped to
// lagClampSlices of slice), with a fresh deadline for vslice.
func (q *eevdfQueue) activate(e *entity, slice int64, vslice int64) {
	q.weightSum += e.weight
	limit := lagClampSlices * scaleVirtual(slice, e.weight)
	lag := min(max(e.lag, -limit), limit)
	e.vruntime = q.vclock - lag
	e.deadline = e.vruntime + vslice
	e.lag = 0
}

// deactivate makes e inactive and keeps its lag. e must not be in a heap.
func (q *eevdfQueue) deactivate(e *entity) {
	q.weightSum -= e.weight
	e.lag = q.vclock - e.vruntime
}

// account charges delta nanoseconds of run time to active entity e.
func (q *eevdfQueue) account(e *entity, delta int64) {
	e.vruntime += scaleVirtual(delta, e.weight)
	if q.weightSum > 0 {
		q.vclock += delta * nice0Weight / q.weightSum
	}
	if e.heapIdx >= 0 && !e.inReady {
		q.later.fix(e)
	}
}

// push queues active entity e.
func (q *eevdfQueue) push(e *entity) {
	if e.vruntime <= q.vclock {
		e.inReady = true
		q.ready.push(e)
	} else {
		e.inReady = false
		q.later.push(e)
	}
}

// remove takes queued entity e out of its heap.
func (q *eevdfQueue) remove(e *entity) {
	if e.inReady {
		q.ready.remove(e)
	} else {
		q.later.remove(e)
	}
}

// peek returns the entity EEVDF would run next, or nil: the eligible one with
// the earliest deadline, or, if none is eligible, the one with the least
// vruntime (it is the closest to eligible; in exact EEVDF one always is).
func (q *eevdfQueue) peek() *entity {
	for len(q.later.items) > 0 && q.later.items[0].vruntime <= q.vclock {
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

// entityHeap is a binary min-heap of entities by deadline or by vruntime,
// keeping each entity's heapIdx current so removal is O(log n).
type entityHeap struct {
	items      []*entity
	byDeadline bool
}

func (h *entityHeap) less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if h.byDeadline {
		return a.deadline < b.deadline
	}
	return a.vruntime < b.vruntime
}

func (h *entityHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].heapIdx = int32(i)
	h.items[j].heapIdx = int32(j)
}

func (h *entityHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *entityHeap) down(i int) bool {
	start := i
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && h.less(r, l) {
			c = r
		}
		if !h.less(c, i) {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > start
}

func (h *entityHeap) push(e *entity) {
	e.heapIdx = int32(len(h.items))
	h.items = append(h.items, e)
	h.up(int(e.heapIdx))
}

func (h *entityHeap) pop() *entity {
	e := h.items[0]
	h.remove(e)
	return e
}

func (h *entityHeap) remove(e *entity) {
	i := int(e.heapIdx)
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	if i != last {
		h.fixAt(i)
	}
	e.heapIdx = -1
	if cap(h.items) > 64 && len(h.items) < cap(h.items)/4 {
		h.items = append([]*entity(nil), h.items...)
	}
}

func (h *entityHeap) fix(e *entity) { h.fixAt(int(e.heapIdx)) }

func (h *entityHeap) fixAt(i int) {
	if !h.down(i) {
		h.up(i)
	}
}
