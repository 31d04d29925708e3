// Package schedmap keeps a value per Scheduler for as long as the
// Scheduler lives: the state that every adapter of one Scheduler shares
// (loadreport's Meter, httpsched's shed counts) without the core package
// knowing of it.
package schedmap

import (
	"runtime"
	"sync"
	"weak"

	"github.com/cpusched/cpusched"
)

// Map holds one value per Scheduler. Its keys are weak, so that a
// Scheduler nobody else refers to is collected and its entry removed. The
// zero Map is empty and ready to use; its methods are safe for concurrent
// use.
type Map[V any] struct {
	mu     sync.Mutex
	values map[weak.Pointer[cpusched.Scheduler]]V
}

// For returns s's value, made by newValue at the first call for s.
// newValue gets s held weakly, for a value that reads s: one that held s
// itself would keep s, and so its entry, alive for good.
func (m *Map[V]) For(s *cpusched.Scheduler, newValue func(weak.Pointer[cpusched.Scheduler]) V) V {
	key := weak.Make(s)
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.values[key]; ok {
		return v
	}
	if m.values == nil {
		m.values = map[weak.Pointer[cpusched.Scheduler]]V{}
	}
	v := newValue(key)
	m.values[key] = v
	runtime.AddCleanup(s, func(key weak.Pointer[cpusched.Scheduler]) {
		m.mu.Lock()
		delete(m.values, key)
		m.mu.Unlock()
	}, key)
	return v
}

// Load returns s's value and true, or the zero value and false if For has
// made none for s.
func (m *Map[V]) Load(s *cpusched.Scheduler) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.values[weak.Make(s)]
	return v, ok
}
