package cpusched

// The heaps of eevdf.go's queues: ready by deadline, later by vruntime.

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
