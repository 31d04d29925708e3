// Tracked groups (Config.Groups): their weights, set once at start-up,
// serve's -groups that names them, and each one's count of passes.

package demo

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// MinGroupWeight and MaxGroupWeight bound a weight of Config.Groups:
// cpusched.SetGroupWeight's range, checked here so that a bad weight is a
// usage error of serve's -groups rather than a server that fails to start.
const (
	MinGroupWeight = 1
	MaxGroupWeight = 10000
)

// CheckGroups reports the first group of groups whose name or weight
// cpusched.SetGroupWeight would refuse, or a name that serve's -groups
// cannot carry (empty, or holding ',' or '='). Its error names the group
// and the valid range.
func CheckGroups(groups map[string]int) error {
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		w := groups[name]
		switch {
		case name == "" || strings.ContainsAny(name, ",="):
			return fmt.Errorf("group %q: a name must be non-empty, without ',' or '='", name)
		case len(name) > MaxGroupLen:
			return fmt.Errorf("group %q: a name must be at most %d bytes, got %d", name, MaxGroupLen, len(name))
		case w < MinGroupWeight || w > MaxGroupWeight:
			return fmt.Errorf("group %q: the weight must be in %d..%d, got %d", name, MinGroupWeight, MaxGroupWeight, w)
		}
	}
	return nil
}

// ParseGroups parses serve's -groups, "NAME=WEIGHT,NAME=WEIGHT" ("" for
// none), into Config.Groups. Its error names the item that is wrong and
// the valid range.
func ParseGroups(list string) (map[string]int, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	groups := map[string]int{}
	for item := range strings.SplitSeq(list, ",") {
		name, weight, ok := strings.Cut(strings.TrimSpace(item), "=")
		w, err := strconv.Atoi(weight)
		if !ok || err != nil {
			return nil, fmt.Errorf("%q: want NAME=WEIGHT, the weight an integer in %d..%d", item, MinGroupWeight, MaxGroupWeight)
		}
		if _, dup := groups[name]; dup {
			return nil, fmt.Errorf("group %q given twice", name)
		}
		groups[name] = w
	}
	if err := CheckGroups(groups); err != nil {
		return nil, err
	}
	return groups, nil
}

// FormatGroups writes groups as ParseGroups reads them, sorted by name.
func FormatGroups(groups map[string]int) string {
	var items []string
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		items = append(items, name+"="+strconv.Itoa(groups[name]))
	}
	return strings.Join(items, ",")
}

// setGroups gives the scheduler each group's weight and makes its pass
// counter. It is called once, by NewServer, before the server serves.
func (s *Server) setGroups(groups map[string]int) error {
	if err := CheckGroups(groups); err != nil {
		return fmt.Errorf("demo: Groups: %w", err)
	}
	s.groupPasses = make(map[string]*atomic.Uint64, len(groups))
	for name, w := range groups {
		if err := s.sched.SetGroupWeight(name, w); err != nil {
			return fmt.Errorf("demo: Groups: %w", err)
		}
		s.groupPasses[name] = new(atomic.Uint64)
	}
	return nil
}

// groupCounter returns the pass counter of group, or nil if it is not one
// of Config.Groups: only named groups are counted apart, so that a client
// cannot grow the server's memory with names.
func (s *Server) groupCounter(group string) *atomic.Uint64 { return s.groupPasses[group] }

// groupPassCounts returns the passes of every group of Config.Groups, nil
// for none.
func (s *Server) groupPassCounts() map[string]uint64 {
	if len(s.groupPasses) == 0 {
		return nil
	}
	out := make(map[string]uint64, len(s.groupPasses))
	for name, n := range s.groupPasses {
		out[name] = n.Load()
	}
	return out
}
