package switchcost

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched"
)

// The workloads, as the seed names them (types 1-3) plus cpusched's.
const (
	Busy     = "busy"     // type 1: a select-default loop that never yields
	Gosched  = "gosched"  // type 2: the same loop calling runtime.Gosched every buffer iterations
	Chan     = "chan"     // type 3: a goroutine pair exchanging counts over a channel of capacity buffer
	CPUSched = "cpusched" // the busy loop as cpusched tasks calling Checkpoint every buffer iterations
)

// Workloads returns every workload name in the order the table shows them.
func Workloads() []string { return []string{Busy, Gosched, Chan, CPUSched} }

// usesBuffer reports whether the workload's behaviour depends on buffer.
func usesBuffer(w string) bool { return w != Busy }

// RunWorkload runs clients goroutines (pairs for Chan, tasks for CPUSched) of
// workload w for d in the calling process and returns the operations done:
// loop iterations, or messages received for Chan. For Gosched and CPUSched a
// buffer of 0 yields (or checkpoints) on every iteration. procs is the number
// of cpusched workers (CPUSched only). It returns an error for an unknown
// workload or a scheduler that refuses a task; ctx cancellation stops the
// workload early and returns what was counted.
func RunWorkload(ctx context.Context, w string, procs, clients, buffer int, d time.Duration) (uint64, error) {
	if clients < 1 || buffer < 0 {
		return 0, fmt.Errorf("switch: clients must be >= 1 and buffer >= 0, got %d and %d", clients, buffer)
	}
	stop := make(chan struct{})
	var stopped atomic.Bool
	var total atomic.Uint64
	var wg sync.WaitGroup
	var sched *cpusched.Scheduler
	var runErr error

	switch w {
	case Busy:
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				total.Add(busyLoop(stop))
			}()
		}
	case Gosched:
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				total.Add(goschedLoop(stop, buffer))
			}()
		}
	case Chan:
		for range clients {
			ch := make(chan uint64, buffer)
			wg.Add(2)
			go func() {
				defer wg.Done()
				var n uint64
				for {
					select {
					case <-stop:
						return
					case ch <- n:
						n++
					}
				}
			}()
			go func() {
				defer wg.Done()
				var got uint64
				for {
					select {
					case <-stop:
						total.Add(got)
						return
					case <-ch:
						got++
					}
				}
			}()
		}
	case CPUSched:
		var err error
		sched, err = cpusched.New(cpusched.WithIsolation(cpusched.IsolationNone), cpusched.WithWorkers(procs))
		if err != nil {
			return 0, fmt.Errorf("switch: %w", err)
		}
		every := uint64(max(buffer, 1))
		for range clients {
			h, err := sched.Go(ctx, func(t *cpusched.Task) error {
				var n uint64
				for !stopped.Load() {
					n++
					if n%every == 0 {
						if err := t.Checkpoint(); err != nil {
							break
						}
					}
				}
				total.Add(n)
				return nil
			})
			if err != nil {
				runErr = fmt.Errorf("switch: submitting a task: %w", err)
				break
			}
			wg.Add(1)
			go func() { defer wg.Done(); <-h.Done() }()
		}
	default:
		return 0, fmt.Errorf("switch: unknown workload %q (valid: %v)", w, Workloads())
	}

	if runErr == nil {
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
		}
	}
	stopped.Store(true)
	close(stop)
	wg.Wait()
	if sched != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := sched.Close(closeCtx); err != nil && runErr == nil {
			runErr = fmt.Errorf("switch: closing the scheduler: %w", err)
		}
		cancel()
	}
	return total.Load(), runErr
}

// busyLoop is the seed's type 1 loop: it never yields on its own.
func busyLoop(stop <-chan struct{}) uint64 {
	var n uint64
	for {
		select {
		case <-stop:
			return n
		default:
			n++
		}
	}
}

// goschedLoop is type 2: runtime.Gosched every buffer iterations (every
// iteration when buffer is 0).
func goschedLoop(stop <-chan struct{}, buffer int) uint64 {
	every := uint64(max(buffer, 1))
	var n uint64
	for {
		select {
		case <-stop:
			return n
		default:
			n++
			if n%every == 0 {
				runtime.Gosched()
			}
		}
	}
}
