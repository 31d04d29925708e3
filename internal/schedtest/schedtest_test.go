package schedtest

import (
	"context"
	"errors"
	"testing"

	"github.com/cpusched/cpusched/internal/leakcheck"

	"github.com/cpusched/cpusched"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func TestHoldSlot(t *testing.T) {
	s := NewScheduler(t, cpusched.WithQueueLimit(1))
	release := HoldSlot(t, s)
	if got := s.Stats().Running; got != 1 {
		t.Fatalf("Stats().Running with the slot held: got %d, want 1", got)
	}
	if _, err := s.Go(context.Background(), func(*cpusched.Task) error { return nil }); err != nil {
		t.Fatalf("Go (queued): %v", err)
	}
	if _, err := s.Go(context.Background(), func(*cpusched.Task) error { return nil }); !errors.Is(err, cpusched.ErrQueueFull) {
		t.Errorf("Go with the slot held and the queue full: got %v, want ErrQueueFull", err)
	}
	release()
	release()
	if err := s.Run(context.Background(), func(*cpusched.Task) error { return nil }); err != nil {
		t.Errorf("Run after release: got %v, want nil", err)
	}
}
