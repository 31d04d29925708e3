package libtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newScheduler returns a Scheduler for opts, closed when the test ends.
func newScheduler(t testing.TB, opts ...cpusched.Option) *cpusched.Scheduler {
	t.Helper()
	s, err := cpusched.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// spinFor burns the CPU for d of wall time, with a Checkpoint every million
// rounds.
func spinFor(task *cpusched.Task, d time.Duration) error {
	end := time.Now().Add(d)
	x := uint64(1)
	for time.Now().Before(end) {
		for range 1_000_000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if err := task.Checkpoint(); err != nil {
			return err
		}
	}
	if x == 0 {
		return errors.New("unreachable")
	}
	return nil
}
