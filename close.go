package cpusched

// Close: stop taking work, wait for the tasks or cancel them, and release
// what New started.

import "context"

func (s *Scheduler) closeDrainedLocked() {
	select {
	case <-s.drained:
	default:
		close(s.drained)
	}
}

// Close stops the scheduler: from now on Run and Go return ErrClosed.
// Queued and running tasks go on until they end or ctx ends. If they all
// end first, Close releases what the scheduler holds (the monitor
// goroutine, the idle hand-off threads of IsolationOSPriority, and its
// raise of GOMAXPROCS, if it made one: New says when and how that is
// restored) and returns nil.
//
// If ctx ends first, Close cancels everything and returns ctx's error at
// once, as http.Server.Shutdown does, without waiting for the tasks:
// queued tasks are removed (their Run or Wait returns ErrClosed); tasks
// parked at a Checkpoint get their slot back first so they can return;
// running tasks, and tasks inside Blocking once fn returns, see their
// Context cancelled (cause ErrClosed) and Checkpoint return ErrClosed.
// What is still running after such a Close: each task that has not yet
// returned (on its Run caller's goroutine, on its own goroutine for Go, on
// a hand-off thread where IsolationOSPriority hands tasks off), the monitor
// goroutine, and one goroutine waiting for the last task to end. When it does, that goroutine releases the
// monitor, the hand-off threads and GOMAXPROCS as above and exits; Stats
// counts the stragglers as they end. To wait for that, call Close again
// with a new ctx: it returns nil once everything is released, or that
// ctx's error.
//
// Close may be called more than once and concurrently; each call waits
// by its own ctx. Calling it from inside a task with a ctx that never
// ends deadlocks: Close waits for that task.
func (s *Scheduler) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	if s.live == 0 {
		s.closeDrainedLocked()
	}
	s.mu.Unlock()
	select {
	case <-s.drained: // preferred when ctx has ended too
	default:
		select {
		case <-s.drained:
		case <-ctx.Done():
			s.killAll()
			s.releaseWhenDrained()
			return ctx.Err()
		}
	}
	s.release()
	return nil
}

// releaseWhenDrained starts, once, the goroutine that releases the
// scheduler when the last straggler of a Close that gave up has ended.
func (s *Scheduler) releaseWhenDrained() {
	s.mu.Lock()
	started := s.releasing
	s.releasing = true
	s.mu.Unlock()
	if !started {
		go func() {
			<-s.drained
			s.release()
		}()
	}
}

// release stops the monitor and the hand-off threads and restores
// GOMAXPROCS (IsolationOSPriority's raise in osMode.close, once its
// threads have exited; IsolationReserve's here), once every task has
// ended.
// Concurrent callers return when it is done.
func (s *Scheduler) release() {
	s.closeOnce.Do(func() {
		s.kill()
		if s.monitorStop != nil {
			close(s.monitorStop)
			<-s.monitorDone
		}
		s.os.close()
		s.procs.release()
	})
}
