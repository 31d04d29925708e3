package libtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime/trace"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
	xtrace "golang.org/x/exp/trace"
)

// The region types package cpusched writes (docs/observability.md).
const (
	traceRun      = "cpusched.run"
	traceBlocking = "cpusched.blocking"
)

// TestTraceTasksAndRegions traces two tasks that take turns on one worker
// and checks that each is a trace task whose slices are "cpusched.run"
// regions, with its Blocking call in a "cpusched.blocking" region.
func TestTraceTasksAndRegions(t *testing.T) {
	// IsolationReserve, so that the tasks' slices end at the scheduler's
	// own 1 ms slice whatever the thread priorities allow.
	s := newScheduler(t, cpusched.WithIsolation(cpusched.IsolationReserve), cpusched.WithWorkers(1), cpusched.WithSlice(time.Millisecond))
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("cannot start tracing (already on?): %v", err)
	}
	const steps = 8
	bothQueued := make(chan struct{})
	long := func(task *cpusched.Task) error {
		<-bothQueued // else the first could end before the second arrives
		for i := range steps {
			if i == steps/2 {
				task.Blocking(func() {})
			}
			// Past the slice, so that the other task gets a turn.
			end := time.Now().Add(2 * time.Millisecond)
			for time.Now().Before(end) {
			}
			if err := task.Checkpoint(); err != nil {
				return err
			}
		}
		return nil
	}
	h1, err1 := s.Go(context.Background(), long)
	h2, err2 := s.Go(context.Background(), long, cpusched.WithClass(cpusched.ClassBatch))
	close(bothQueued)
	if err := errors.Join(err1, err2); err != nil {
		trace.Stop()
		t.Fatal(err)
	}
	err := errors.Join(h1.Wait(), h2.Wait())
	trace.Stop()
	if err != nil {
		t.Fatal(err)
	}
	preempted := int(s.Stats().Preempted)
	if preempted == 0 {
		t.Fatal("the tasks never took turns; the test needs them to")
	}

	type counts struct{ run, blocking, begins, ends int }
	tasks := map[xtrace.TaskID]string{}
	regions := map[xtrace.TaskID]*counts{}
	r, err := xtrace.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading the trace: %v", err)
		}
		switch ev.Kind() {
		case xtrace.EventTaskBegin:
			tasks[ev.Task().ID] = ev.Task().Type
		case xtrace.EventRegionBegin, xtrace.EventRegionEnd:
			reg := ev.Region()
			c := regions[reg.Task]
			if c == nil {
				c = &counts{}
				regions[reg.Task] = c
			}
			if ev.Kind() == xtrace.EventRegionEnd {
				c.ends++
				continue
			}
			c.begins++
			switch reg.Type {
			case traceRun:
				c.run++
			case traceBlocking:
				c.blocking++
			}
		}
	}
	// One cpusched.run region per stretch on a slot: the first, one after
	// Blocking, and one after each time a task gave its slot up at a
	// Checkpoint (Preempted counts those, for both tasks together: which
	// task is preempted how often depends on goroutine timing).
	var found []string
	runs := 0
	for id, typ := range tasks {
		c := regions[id]
		found = append(found, typ)
		if c == nil || c.run < 2 || c.blocking != 1 || c.begins != c.ends {
			t.Errorf("trace task %s: regions %+v; want at least 2 %s (the first, one after Blocking), 1 %s, each ended", typ, c, traceRun, traceBlocking)
			continue
		}
		runs += c.run
	}
	if want := 2*len(tasks) + preempted; runs != want {
		t.Errorf("%d %s regions in all, want %d: 2 per task and one per preemption (%d)", runs, traceRun, want, preempted)
	}
	slices.Sort(found)
	if got := strings.Join(found, ","); got != "cpusched.batch,cpusched.normal" {
		t.Errorf("trace tasks %s, want cpusched.batch,cpusched.normal", got)
	}
}
