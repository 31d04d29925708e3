package cpusched

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
	"github.com/google/pprof/profile"
	xtrace "golang.org/x/exp/trace"
)

// spinFor burns the CPU for d of wall time, with a Checkpoint every million
// rounds.
func spinFor(task *Task, d time.Duration) error {
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

// TestCPUProfileCarriesTaskLabels takes a CPU profile while a task spins and
// checks that the task's samples carry its class and group labels, so that
// `go tool pprof -tagfocus cpusched_class=batch` finds them.
func TestCPUProfileCarriesTaskLabels(t *testing.T) {
	for _, mode := range IsolationModes() {
		t.Run(mode.String(), func(t *testing.T) {
			s := newTestScheduler(t, WithIsolation(mode))
			var buf bytes.Buffer
			if err := pprof.StartCPUProfile(&buf); err != nil {
				t.Skipf("cannot start a CPU profile (one already running?): %v", err)
			}
			err := s.Run(context.Background(), func(task *Task) error {
				return spinFor(task, 300*time.Millisecond)
			}, WithClass(ClassBatch), WithGroup("tenant-a"))
			pprof.StopCPUProfile()
			if err != nil {
				t.Fatal(err)
			}
			p, err := profile.Parse(&buf)
			if err != nil {
				t.Fatalf("parsing the profile: %v", err)
			}
			var spin, labelled int64
			for _, sample := range p.Sample {
				if !stackHas(sample, "cpusched.spinFor") {
					continue
				}
				spin += sample.Value[0] // samples/count
				if strings.Join(sample.Label[LabelClass], ",") == "batch" && strings.Join(sample.Label[LabelGroup], ",") == "tenant-a" {
					labelled += sample.Value[0]
				}
			}
			if spin == 0 || labelled != spin {
				t.Errorf("%d of %d samples in spinFor carry %s=batch %s=tenant-a; want all, and at least one", labelled, spin, LabelClass, LabelGroup)
			}
		})
	}
}

// stackHas reports whether function fn is on sample's stack.
func stackHas(sample *profile.Sample, fn string) bool {
	for _, loc := range sample.Location {
		for _, line := range loc.Line {
			if line.Function != nil && strings.HasSuffix(line.Function.Name, fn) {
				return true
			}
		}
	}
	return false
}

// labelsHere returns the pprof labels of the calling goroutine, as the
// goroutine profile prints them ("" for none).
func labelsHere() string {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	for _, record := range strings.Split(b.String(), "\n\n") {
		if !strings.Contains(record, "cpusched.labelsHere") {
			continue
		}
		for _, line := range strings.Split(record, "\n") {
			if l, ok := strings.CutPrefix(line, "# labels: "); ok {
				return l
			}
		}
		return ""
	}
	return "not found"
}

// TestGoroutineLabels checks the labels inside tasks, merged with the
// caller's as pprof.Do merges them, and given back when Run returns.
func TestGoroutineLabels(t *testing.T) {
	for _, mode := range IsolationModes() {
		t.Run(mode.String(), func(t *testing.T) {
			s := newTestScheduler(t, WithIsolation(mode))
			plain := context.Background()
			route := pprof.WithLabels(plain, pprof.Labels("route", "/x"))
			tests := []struct {
				name       string
				ctx        context.Context
				goTask     bool
				opts       []TaskOption
				want       string
				wantBefore string // the caller's labels, before and after Run
			}{
				{"run", plain, false, nil, `{"cpusched_class":"normal"}`, ""},
				{"run in a group", plain, false, []TaskOption{WithGroup("g"), WithClass(ClassIdle)}, `{"cpusched_class":"idle", "cpusched_group":"g"}`, ""},
				{"run with caller labels", route, false, []TaskOption{WithGroup("g")}, `{"cpusched_class":"normal", "cpusched_group":"g", "route":"/x"}`, `{"route":"/x"}`},
				{"go", plain, true, []TaskOption{WithClass(ClassRealtime)}, `{"cpusched_class":"realtime"}`, ""},
				{"go with caller labels", route, true, nil, `{"cpusched_class":"normal", "route":"/x"}`, `{"route":"/x"}`},
			}
			for _, tt := range tests {
				pprof.SetGoroutineLabels(tt.ctx)
				var inside string
				fn := func(*Task) error { inside = labelsHere(); return nil }
				var err error
				if tt.goTask {
					var h *Handle
					if h, err = s.Go(tt.ctx, fn, tt.opts...); err == nil {
						err = h.Wait()
					}
				} else {
					err = s.Run(tt.ctx, fn, tt.opts...)
				}
				after := labelsHere()
				pprof.SetGoroutineLabels(context.Background())
				if err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				if inside != tt.want || after != tt.wantBefore {
					t.Errorf("%s: labels inside %s, after %q; want %s, %q", tt.name, inside, after, tt.want, tt.wantBefore)
				}
			}
		})
	}
}

// TestTraceTasksAndRegions traces two tasks that take turns on one worker
// and checks that each is a trace task whose slices are "cpusched.run"
// regions, with its Blocking call in a "cpusched.blocking" region.
func TestTraceTasksAndRegions(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(1), withClock(clk), withoutMonitor())
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("cannot start tracing (already on?): %v", err)
	}
	const steps = 8
	bothQueued := make(chan struct{})
	long := func(task *Task) error {
		<-bothQueued // else the first could end before the second arrives
		for i := range steps {
			if i == steps/2 {
				task.Blocking(func() {})
			}
			clk.Advance(int64(2 * time.Millisecond)) // past the slice
			task.s.tick()
			if err := task.Checkpoint(); err != nil {
				return err
			}
		}
		return nil
	}
	h1, err1 := s.Go(context.Background(), long)
	h2, err2 := s.Go(context.Background(), long, WithClass(ClassBatch))
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
	if got := strings.Join(sortedStrings(found), ","); got != "cpusched.batch,cpusched.normal" {
		t.Errorf("trace tasks %s, want cpusched.batch,cpusched.normal", got)
	}
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestLogger checks the events WithLogger receives, and that the default is
// silence, also on the standard logger.
func TestLogger(t *testing.T) {
	var std bytes.Buffer
	defer log.SetOutput(log.Writer())
	log.SetOutput(&std)

	saved := probeOSPriority
	probeOSPriority = func(osprio.Policy) error { return errors.New("setpriority: operation not permitted") }
	s, err := New(WithIsolation(IsolationOSPriority)) // falls back, silently
	probeOSPriority = saved
	if err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	if std.Len() != 0 {
		t.Errorf("without WithLogger, the standard logger got %q; want nothing", std.String())
	}

	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	probeOSPriority = func(osprio.Policy) error { return errors.New("setpriority: operation not permitted") }
	s, err = New(WithIsolation(IsolationOSPriority), WithLogger(logger))
	probeOSPriority = saved
	if err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	for _, want := range []string{"level=WARN msg=\"cpusched: IsolationOSPriority unavailable", "operation not permitted", "msg=\"cpusched: scheduler started\" isolation=reserve"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %q lacks %q", buf.String(), want)
		}
	}

	if !osprio.Supported() || probeOSPriority(defaultOSPolicy) != nil {
		return
	}
	buf.Reset()
	before := runtime.GOMAXPROCS(0)
	s, err = New(WithIsolation(IsolationOSPriority), WithWorkers(before+1), WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	for _, want := range []string{"isolation=ospriority", "raised GOMAXPROCS", "GOMAXPROCS restored"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %q lacks %q", buf.String(), want)
		}
	}
}
