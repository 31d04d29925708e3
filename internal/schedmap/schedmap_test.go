package schedmap

import (
	"context"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/leakcheck"
	"github.com/cpusched/cpusched/internal/schedtest"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func TestMap(t *testing.T) {
	var m Map[*int]
	made := 0
	newValue := func(weak.Pointer[cpusched.Scheduler]) *int { made++; return new(int) }
	s1, s2 := schedtest.NewScheduler(t), schedtest.NewScheduler(t)
	if v, ok := m.Load(s1); v != nil || ok {
		t.Errorf("Load before For: got %v, %t; want nil, false", v, ok)
	}
	v1 := m.For(s1, newValue)
	if m.For(s1, newValue) != v1 || m.For(s2, newValue) == v1 || made != 2 {
		t.Errorf("got %d values made, want one per scheduler (2)", made)
	}
	if v, ok := m.Load(s1); v != v1 || !ok {
		t.Errorf("Load after For: got %p, %t; want %p, true", v, ok, v1)
	}

	// A scheduler that is gone leaves the map.
	s, err := cpusched.New(cpusched.WithIsolation(cpusched.IsolationNone))
	if err != nil {
		t.Fatal(err)
	}
	m.For(s, newValue)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	entries := func() int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.values)
	}
	s = nil
	for deadline := time.Now().Add(10 * time.Second); entries() > 2; {
		if time.Now().After(deadline) {
			t.Fatalf("got %d entries 10s after a scheduler went, want 2", entries())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}
