package cpusched

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// holder is a task that holds its slot without a Checkpoint, as a bcrypt
// call does, and reads its Task.Overrun on its own goroutine when asked.
type holder struct {
	ask     chan chan time.Duration
	release chan struct{}
	h       *Handle
}

func startHolder(t *testing.T, s *Scheduler) *holder {
	t.Helper()
	hd := &holder{ask: make(chan chan time.Duration), release: make(chan struct{})}
	started := make(chan struct{})
	h, err := s.Go(context.Background(), func(task *Task) error {
		close(started)
		for {
			select {
			case reply := <-hd.ask:
				reply <- task.Overrun()
			case <-hd.release:
				return nil
			}
		}
	})
	if err != nil {
		t.Fatalf("Go: %v", err)
	}
	<-started
	hd.h = h
	return hd
}

func (hd *holder) overrun() time.Duration {
	reply := make(chan time.Duration)
	hd.ask <- reply
	return <-reply
}

func (hd *holder) end() {
	close(hd.release)
	hd.h.Wait()
}

// TestOverruns: Task.Overrun and Scheduler.Overruns count a holder's run
// past its slice while another task waits, from the later of its slice's
// end and the start of the wait, once the monitor has asked it to give its
// slot up.
func TestOverruns(t *testing.T) {
	const ms = int64(time.Millisecond)
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(2), withClock(clk), withoutMonitor())
	a := startHolder(t, s)
	clk.Advance(2 * ms) // a is past its slice (at most DefaultSlice), nobody waits
	b := startHolder(t, s)
	overruns := func() []time.Duration {
		t.Helper()
		got, slots := s.Overruns(nil)
		if slots != 2 {
			t.Errorf("Overruns: %d slots, want 2", slots)
		}
		slices.Sort(got)
		return got
	}
	check := func(step string, wantA, wantB time.Duration, want []time.Duration) {
		t.Helper()
		if got := a.overrun(); got != wantA {
			t.Errorf("%s: a's Overrun %v, want %v", step, got, wantA)
		}
		if b != nil {
			if got := b.overrun(); got != wantB {
				t.Errorf("%s: b's Overrun %v, want %v", step, got, wantB)
			}
		}
		if got := overruns(); !slices.Equal(got, want) {
			t.Errorf("%s: Overruns %v, want %v", step, got, want)
		}
	}
	check("nobody waits", 0, 0, nil)

	waiting := make(chan struct{})
	c, err := s.Go(context.Background(), func(*Task) error { close(waiting); return nil })
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(ms / 10) // b is within its slice (at least DefaultSlice/4)
	check("a not asked yet", 0, 0, nil)
	s.tick() // the monitor asks a, past its slice, to give its slot up
	check("b within its slice", 100*time.Microsecond, 0, []time.Duration{100 * time.Microsecond})
	clk.Advance(5 * ms) // b is past its slice too
	s.tick()
	wantA := time.Duration(51 * ms / 10)
	if got := a.overrun(); got != wantA {
		t.Errorf("both past their slices: a's Overrun %v, want %v (since c began to wait)", got, wantA)
	}
	gotB := b.overrun()
	if gotB <= 0 || gotB >= wantA {
		t.Errorf("both past their slices: b's Overrun %v, want above 0 and below a's %v (b's slice ended after c began to wait)", gotB, wantA)
	}
	if got := overruns(); !slices.Equal(got, []time.Duration{gotB, wantA}) {
		t.Errorf("both past their slices: Overruns %v, want %v", got, []time.Duration{gotB, wantA})
	}

	a.end() // c takes a's slot, within its slice, and ends: nobody waits
	<-waiting
	c.Wait()
	a, b = b, nil
	check("c ran", 0, 0, nil)
	a.end()
}

// TestOverrunsConcurrent reads the overruns while tasks come and go,
// checkpoint and read their own (for the race detector).
func TestOverrunsConcurrent(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(2))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var buf []time.Duration
		for {
			select {
			case <-stop:
				return
			default:
				buf, _ = s.Overruns(buf[:0])
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			err := s.Run(context.Background(), func(task *Task) error {
				for start := time.Now(); time.Since(start) < 20*time.Millisecond; {
					if i%2 == 0 { // half never come to a Checkpoint
						_ = task.Checkpoint()
					}
					if task.Overrun() < 0 {
						return errors.New("negative overrun")
					}
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-done
}
