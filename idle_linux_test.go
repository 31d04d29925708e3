package cpusched

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestIdleReleaseRealSleep runs, on one worker, a task that computes,
// sleeps 50 ms without Blocking and computes again, and a task queued
// behind it, in IsolationOSPriority's ways of running a task: on its own
// goroutine, handed off, and handed off where threads cannot be raised.
// With WithIdleRelease the queued task starts during the sleep, and the
// sleeper takes a slot back; without it, the queued task starts only
// once the sleeper has ended.
func TestIdleReleaseRealSleep(t *testing.T) {
	if testing.Short() {
		t.Skip("sleeps")
	}
	noRaise := withOS(nil, func() error { return errors.New("setpriority: permission denied") }, nil)
	for _, m := range []struct {
		name string
		opts []Option
	}{
		{"own", nil},
		{"handoff", []Option{withOSHandoff()}},
		{"unraisable", []Option{noRaise}},
	} {
		t.Run(m.name, func(t *testing.T) {
			for _, on := range []bool{true, false} {
				// A busy machine may delay the monitor past the sleep:
				// the release gets a few tries.
				var during bool
				for try := 0; try < 3; try++ {
					if during = idleSleepRound(t, on, m.opts); during == on {
						break
					}
				}
				if during != on {
					t.Errorf("WithIdleRelease %v: the queued task started during the sleep: %v, want %v", on, during, on)
				}
			}
		})
	}
}

// idleSleepRound runs one round of TestIdleReleaseRealSleep, reporting
// whether the queued task started while the sleeper slept.
func idleSleepRound(t *testing.T, on bool, opts []Option) (during bool) {
	s := newTestScheduler(t, append([]Option{WithIsolation(IsolationOSPriority), WithWorkers(1)}, opts...)...)
	if s.Stats().Isolation != IsolationOSPriority {
		t.Skip("IsolationOSPriority is not available here")
	}
	var topts []TaskOption
	if on {
		topts = append(topts, WithIdleRelease(2*time.Millisecond))
	}
	slept := make(chan [2]time.Time, 1)
	began := make(chan struct{})
	h, err := s.Go(context.Background(), func(*Task) error {
		close(began)
		spin(5 * time.Millisecond)
		start := time.Now()
		time.Sleep(50 * time.Millisecond) // no Blocking
		slept <- [2]time.Time{start, time.Now()}
		spin(5 * time.Millisecond)
		return nil
	}, topts...)
	if err != nil {
		t.Fatal(err)
	}
	<-began
	var queuedStart time.Time
	hq, err := s.Go(context.Background(), func(*Task) error {
		queuedStart = time.Now()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []*Handle{h, hq} {
		if err := h.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	sleep := <-slept
	st := s.Stats()
	if on && st.IdleReleases == 0 && queuedStart.Before(sleep[1]) {
		t.Errorf("the queued task ran during the sleep, but IdleReleases is 0")
	}
	if !on && st.IdleReleases != 0 {
		t.Errorf("IdleReleases %d without the option", st.IdleReleases)
	}
	if st.Running != 0 || st.Blocked != 0 || st.Completed != 2 {
		t.Errorf("at the end: Running %d, Blocked %d, Completed %d; want 0, 0, 2", st.Running, st.Blocked, st.Completed)
	}
	checkIdentity(t, st)
	t.Logf("WithIdleRelease %v: the queued task started %v into the sleep of %v; IdleReleases %d", on, queuedStart.Sub(sleep[0]), sleep[1].Sub(sleep[0]), st.IdleReleases)
	return queuedStart.After(sleep[0]) && queuedStart.Before(sleep[1])
}
