package cpusched

// link is an element's place in an intrusive doubly linked list: the
// element holds it, so joining a list allocates nothing and leaving one
// costs O(1). The lists here: the tasks watching one context (ctxWatch),
// a group's small-task lane and the groups with lane tasks (runqueue.go).
type link[T any] struct{ next, prev *T }

// list is the head and tail of an intrusive list; at returns an element's
// link in it (one element may be in several lists).
type list[T any] struct {
	head, tail *T
	at         func(*T) *link[T]
}

// pushBack appends e.
func (l *list[T]) pushBack(e *T) {
	el := l.at(e)
	el.next, el.prev = nil, l.tail
	if l.tail != nil {
		l.at(l.tail).next = e
	} else {
		l.head = e
	}
	l.tail = e
}

// remove takes e, which must be in l, out of it.
func (l *list[T]) remove(e *T) {
	el := l.at(e)
	if el.prev != nil {
		l.at(el.prev).next = el.next
	} else {
		l.head = el.next
	}
	if el.next != nil {
		l.at(el.next).prev = el.prev
	} else {
		l.tail = el.prev
	}
	el.next, el.prev = nil, nil
}
