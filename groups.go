package cpusched

// Groups: SetGroupWeight, and the counters of tracked and other groups.

import (
	"context"
	"fmt"
)

// groupCounters are the Stats of a tracked group, or of all the other
// groups together (Scheduler.otherGroups).
type groupCounters struct {
	name             string
	weight           int // SetGroupWeight's, or DefaultGroupWeight
	submitted, ended uint64
	runTime, cpuTime int64
	waits, runs      Histogram
	// labels are the pprof labels of the group's tasks, per class, made
	// when the first task of that class arrives (see setLabels).
	labels [numClasses]context.Context
}

// SetGroupWeight sets the weight of a group, 1..10000 (default 100): groups
// share the slot time in proportion to their weights, whatever their task
// counts. It applies at once, also to tasks already queued or running.
//
// It also makes the group tracked: its weight, its place in the run queue
// (its lag) and its own entry in Stats.Groups are kept while it has no
// task, and a debt (run time it got past its share, as when a task ran
// long without a Checkpoint) is paid before it runs again, also if it had
// no task meanwhile. A group that SetGroupWeight never named is freed,
// with its lag and debt, when its last task ends, and its tasks are
// counted with the other such groups in
// Stats.OtherGroups, so a program may name a group per tenant or per user
// without its memory or its metrics growing with the number of names. Name
// the groups you want to see apart (bounded label values, as Prometheus'
// guidance on cardinality asks) with SetGroupWeight, at their default
// weight if need be; their statistics count from that call on.
func (s *Scheduler) SetGroupWeight(group string, weight int) error {
	if weight < minGroupWeight || weight > maxGroupWeight {
		return fmt.Errorf("cpusched: SetGroupWeight(%q, %d): weight must be in %d..%d", group, weight, minGroupWeight, maxGroupWeight)
	}
	if len(group) > MaxGroupNameLen {
		return fmt.Errorf("cpusched: SetGroupWeight: group name is %d bytes, must be at most %d (MaxGroupNameLen)", len(group), MaxGroupNameLen)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gc := s.groups[group]
	if gc == nil {
		gc = &groupCounters{name: group}
		s.groups[group] = gc
	}
	gc.weight = weight
	s.rq.setGroupWeight(group, weight)
	return nil
}

// groupStatsLocked returns the counters a task of the named group adds to.
func (s *Scheduler) groupStatsLocked(name string) *groupCounters {
	// The last tracked group's first: a tracked group's counters are never
	// freed, and most tasks are of the group the last one was.
	if g := s.lastGroup; g != nil && g.name == name {
		return g
	}
	if g := s.groups[name]; g != nil {
		s.lastGroup = g
		return g
	}
	return &s.otherGroups
}
