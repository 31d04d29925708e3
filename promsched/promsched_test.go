package promsched

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/schedtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// knownState brings s (one slot) to a state whose counters are known:
// one task of each outcome, one rejected, one running in group gold (class
// batch, until release is closed) and one queued behind it in group free
// (class idle). Groups: "" has 2 tasks, gold 2 (weight 300), free 2; free
// is untracked (no SetGroupWeight), so it is exported as group="(other)".
func knownState(t *testing.T, s *cpusched.Scheduler) (release chan struct{}, queued *cpusched.Handle) {
	t.Helper()
	ctx := context.Background()
	if err := s.SetGroupWeight("gold", 300); err != nil {
		t.Fatal(err)
	}
	if err := s.Run(ctx, func(*cpusched.Task) error { return nil }, cpusched.WithGroup("gold")); err != nil {
		t.Fatalf("completed task: got %v, want nil", err)
	}
	errFail := errors.New("fail")
	if err := s.Run(ctx, func(*cpusched.Task) error { return errFail }, cpusched.WithGroup("free")); !errors.Is(err, errFail) {
		t.Fatalf("failed task: got %v, want %v", err, errFail)
	}
	var pe *cpusched.PanicError
	if err := s.Run(ctx, func(*cpusched.Task) error { panic("boom") }); !errors.As(err, &pe) {
		t.Fatalf("panicking task: got %v, want a *PanicError", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Run(cancelled, func(*cpusched.Task) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("task with an ended context: got %v, want %v", err, context.Canceled)
	}
	if err := s.Run(ctx, func(*cpusched.Task) error { return nil }, cpusched.WithNice(100)); err == nil {
		t.Fatal("task with nice 100: got nil error, want one")
	}

	release = make(chan struct{})
	started := make(chan struct{})
	if _, err := s.Go(ctx, func(*cpusched.Task) error {
		close(started)
		<-release
		return nil
	}, cpusched.WithGroup("gold"), cpusched.WithClass(cpusched.ClassBatch)); err != nil {
		t.Fatal(err)
	}
	<-started
	queued, err := s.Go(ctx, func(*cpusched.Task) error { return nil },
		cpusched.WithGroup("free"), cpusched.WithClass(cpusched.ClassIdle))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Queued; got != 1 {
		t.Fatalf("Stats().Queued: got %d, want 1", got)
	}
	return release, queued
}

// TestCollectAndCompare checks every metric whose value does not depend on
// timing against the text exposition of knownState.
func TestCollectAndCompare(t *testing.T) {
	s := schedtest.NewScheduler(t)
	release, queued := knownState(t, s)
	defer func() {
		close(release)
		queued.Wait()
	}()

	const want = `
# HELP cpusched_tasks_submitted_total Tasks the scheduler accepted.
# TYPE cpusched_tasks_submitted_total counter
cpusched_tasks_submitted_total 6
# HELP cpusched_tasks_ended_total Tasks that ended, by outcome: completed (nil error), failed (an error), canceled (context ended or Close), panicked.
# TYPE cpusched_tasks_ended_total counter
cpusched_tasks_ended_total{outcome="canceled"} 1
cpusched_tasks_ended_total{outcome="completed"} 1
cpusched_tasks_ended_total{outcome="failed"} 1
cpusched_tasks_ended_total{outcome="panicked"} 1
# HELP cpusched_tasks_rejected_total Tasks the scheduler refused: closed, queue full, or an out-of-range option.
# TYPE cpusched_tasks_rejected_total counter
cpusched_tasks_rejected_total 1
# HELP cpusched_preemptions_total Times a task gave its slot to another at a Checkpoint.
# TYPE cpusched_preemptions_total counter
cpusched_preemptions_total 0
# HELP cpusched_idle_releases_total Times a task whose thread slept without Blocking gave its slot up (WithIdleRelease).
# TYPE cpusched_idle_releases_total counter
cpusched_idle_releases_total 0
# HELP cpusched_kept_slots_total Times a slot a task that yields left was kept for the next such task, not given to a waiting call that cannot yield.
# TYPE cpusched_kept_slots_total counter
cpusched_kept_slots_total 0
# HELP cpusched_kept_slots_taken_total Kept slots that a task arriving meanwhile took.
# TYPE cpusched_kept_slots_taken_total counter
cpusched_kept_slots_taken_total 0
# HELP cpusched_tasks_queued Tasks accepted and not yet started.
# TYPE cpusched_tasks_queued gauge
cpusched_tasks_queued 1
# HELP cpusched_tasks_running Tasks holding a worker slot.
# TYPE cpusched_tasks_running gauge
cpusched_tasks_running 1
# HELP cpusched_tasks_started Tasks started and not yet ended.
# TYPE cpusched_tasks_started gauge
cpusched_tasks_started 1
# HELP cpusched_tasks_blocked Tasks inside Blocking.
# TYPE cpusched_tasks_blocked gauge
cpusched_tasks_blocked 0
# HELP cpusched_workers Worker slots.
# TYPE cpusched_workers gauge
cpusched_workers 1
# HELP cpusched_slots_lent Slots IsolationOSPriority lends to the rest of the program, which keeps its Ps busy.
# TYPE cpusched_slots_lent gauge
cpusched_slots_lent 0
# HELP cpusched_slot_lends_total Times IsolationOSPriority lent a slot to the rest of the program.
# TYPE cpusched_slot_lends_total counter
cpusched_slot_lends_total 0
# HELP cpusched_lent_slot_seconds_total Slot time IsolationOSPriority lent to the rest of the program.
# TYPE cpusched_lent_slot_seconds_total counter
cpusched_lent_slot_seconds_total 0
# HELP cpusched_isolation_info Always 1; the mode label is the isolation mode in effect.
# TYPE cpusched_isolation_info gauge
cpusched_isolation_info{mode="none"} 1
# HELP cpusched_class_tasks_submitted_total Tasks the scheduler accepted, by class.
# TYPE cpusched_class_tasks_submitted_total counter
cpusched_class_tasks_submitted_total{class="batch"} 1
cpusched_class_tasks_submitted_total{class="idle"} 1
cpusched_class_tasks_submitted_total{class="normal"} 4
cpusched_class_tasks_submitted_total{class="realtime"} 0
# HELP cpusched_group_weight The group's weight: groups share slot time in proportion to it.
# TYPE cpusched_group_weight gauge
cpusched_group_weight{group=""} 100
cpusched_group_weight{group="(other)"} 100
cpusched_group_weight{group="gold"} 300
# HELP cpusched_group_tasks_submitted_total Tasks the scheduler accepted, by group.
# TYPE cpusched_group_tasks_submitted_total counter
cpusched_group_tasks_submitted_total{group=""} 2
cpusched_group_tasks_submitted_total{group="(other)"} 2
cpusched_group_tasks_submitted_total{group="gold"} 2
# HELP cpusched_group_tasks_ended_total Tasks that ended, whatever their outcome, by group.
# TYPE cpusched_group_tasks_ended_total counter
cpusched_group_tasks_ended_total{group=""} 2
cpusched_group_tasks_ended_total{group="(other)"} 1
cpusched_group_tasks_ended_total{group="gold"} 1
`
	names := []string{
		"cpusched_tasks_submitted_total", "cpusched_tasks_ended_total", "cpusched_tasks_rejected_total",
		"cpusched_preemptions_total", "cpusched_idle_releases_total", "cpusched_kept_slots_total", "cpusched_kept_slots_taken_total", "cpusched_tasks_queued", "cpusched_tasks_started",
		"cpusched_tasks_running", "cpusched_tasks_blocked", "cpusched_workers", "cpusched_slots_lent", "cpusched_slot_lends_total", "cpusched_lent_slot_seconds_total", "cpusched_isolation_info",
		"cpusched_class_tasks_submitted_total", "cpusched_group_weight",
		"cpusched_group_tasks_submitted_total", "cpusched_group_tasks_ended_total",
	}
	if err := testutil.CollectAndCompare(NewCollector(s), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	// The histograms' counts do not depend on timing: 3 normal tasks and
	// the batch one started, 3 normal tasks that started have ended; per
	// group likewise.
	families := gather(t, s)
	counts := []struct {
		metric, label string
		want          uint64
	}{
		{"cpusched_class_queue_wait_seconds", "normal", 3},
		{"cpusched_class_queue_wait_seconds", "batch", 1},
		{"cpusched_class_queue_wait_seconds", "idle", 0},
		{"cpusched_class_queue_wait_seconds", "realtime", 0},
		{"cpusched_class_task_run_seconds", "normal", 3},
		{"cpusched_class_task_run_seconds", "batch", 0},
		{"cpusched_group_queue_wait_seconds", "gold", 2},
		{"cpusched_group_queue_wait_seconds", OtherGroups, 1},
		{"cpusched_group_queue_wait_seconds", "", 1},
		{"cpusched_group_task_run_seconds", "gold", 1},
		{"cpusched_group_task_run_seconds", OtherGroups, 1},
		{"cpusched_group_task_run_seconds", "", 1},
	}
	for _, tc := range counts {
		m := find(families, tc.metric, tc.label)
		if m == nil {
			t.Errorf("%s{%q}: missing", tc.metric, tc.label)
			continue
		}
		if got := m.GetHistogram().GetSampleCount(); got != tc.want {
			t.Errorf("%s{%q} count: got %d, want %d", tc.metric, tc.label, got, tc.want)
		}
	}
	// Durations: present and non-negative.
	for _, name := range []string{"cpusched_queue_wait_seconds_total", "cpusched_queue_wait_max_seconds", "cpusched_run_seconds_total", "cpusched_lane_run_seconds_total",
		"cpusched_cpu_seconds_total", "cpusched_cpu_fallback_seconds_total"} {
		m := find(families, name, "")
		if m == nil {
			t.Errorf("%s: missing", name)
			continue
		}
		if got := value(m); got < 0 || math.IsNaN(got) {
			t.Errorf("%s: got %v, want >= 0", name, got)
		}
	}
}

// TestCPUSeconds: the CPU time counters come from one Stats snapshot with
// the run time ones; in IsolationNone (schedtest.NewScheduler's) no
// thread's clock is a task's, so each equals its run time counterpart,
// all of it fallback, running task included.
func TestCPUSeconds(t *testing.T) {
	s := schedtest.NewScheduler(t)
	release, queued := knownState(t, s)
	defer func() {
		close(release)
		queued.Wait()
	}()
	families := gather(t, s)
	pairs := []struct{ cpu, run, label string }{
		{"cpusched_cpu_seconds_total", "cpusched_run_seconds_total", ""},
		{"cpusched_cpu_fallback_seconds_total", "cpusched_run_seconds_total", ""},
		{"cpusched_class_cpu_seconds_total", "cpusched_class_run_seconds_total", "normal"},
		{"cpusched_class_cpu_seconds_total", "cpusched_class_run_seconds_total", "batch"},
		{"cpusched_group_cpu_seconds_total", "cpusched_group_run_seconds_total", "gold"},
		{"cpusched_group_cpu_seconds_total", "cpusched_group_run_seconds_total", OtherGroups},
		{"cpusched_group_cpu_seconds_total", "cpusched_group_run_seconds_total", ""},
	}
	for _, p := range pairs {
		cpu, run := find(families, p.cpu, p.label), find(families, p.run, p.label)
		if cpu == nil || run == nil {
			t.Errorf("%s{%q}, %s{%q}: got %v, %v; want both", p.cpu, p.label, p.run, p.label, cpu, run)
			continue
		}
		if value(cpu) != value(run) || value(cpu) < 0 {
			t.Errorf("%s{%q} = %v, %s = %v; want them equal in IsolationNone", p.cpu, p.label, value(cpu), p.run, value(run))
		}
	}
}

// TestHTTPShed sheds one request of each reason through httpsched
// handlers of one scheduler, and finds each counted once
// (regression: cpusched_tasks_rejected_total stayed 0 through 577
// requests that WithMaxQueueWait's limit shed, and nothing counted them).
func TestHTTPShed(t *testing.T) {
	s := schedtest.NewScheduler(t, cpusched.WithQueueLimit(4))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	limited := httpsched.Handler(s, ok, httpsched.WithMaxQueueWait(time.Second)) // admits 4 on 1 slot until a first request ends
	plain := httpsched.Handler(s, ok, httpsched.WithRequestTaskOptions(func(r *http.Request) ([]cpusched.TaskOption, error) {
		return []cpusched.TaskOption{cpusched.WithNice(99)}, nil // out of range
	}))
	serve := func(h http.Handler) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		return rec.Code
	}
	release := schedtest.HoldSlot(t, s)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { serve(limited) })
	}
	schedtest.WaitQueued(t, s, 4)
	steps := []struct {
		what string
		h    http.Handler
		want int
	}{
		{"wait limit", limited, http.StatusServiceUnavailable},
		{"queue full", httpsched.Handler(s, ok), http.StatusServiceUnavailable},
		{"bad options", plain, http.StatusBadRequest},
	}
	for _, st := range steps {
		if got := serve(st.h); got != st.want {
			t.Errorf("%s: got %d, want %d", st.what, got, st.want)
		}
	}
	release()
	wg.Wait()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := serve(limited); got != http.StatusServiceUnavailable {
		t.Errorf("closed: got %d, want 503", got)
	}
	const want = `
# HELP cpusched_http_shed_total Requests httpsched answered without running their handler, by reason: queue_full, wait_limit (WithMaxQueueWait), closed (503), bad_options (400).
# TYPE cpusched_http_shed_total counter
cpusched_http_shed_total{reason="bad_options"} 1
cpusched_http_shed_total{reason="closed"} 1
cpusched_http_shed_total{reason="queue_full"} 1
cpusched_http_shed_total{reason="wait_limit"} 1
`
	if err := testutil.CollectAndCompare(NewCollector(s), strings.NewReader(want), "cpusched_http_shed_total"); err != nil {
		t.Error(err)
	}
}

// TestHistogramsCumulative runs tasks in two groups and checks every
// histogram: bucket bounds rise, counts are cumulative (never fall), and the
// sample count is the number of tasks.
func TestHistogramsCumulative(t *testing.T) {
	s := schedtest.NewScheduler(t)
	const perGroup = 25
	if err := s.SetGroupWeight("a", cpusched.DefaultGroupWeight); err != nil { // tracked; b is not
		t.Fatal(err)
	}
	var handles []*cpusched.Handle
	for _, group := range []string{"a", "b"} {
		for i := range perGroup {
			h, err := s.Go(context.Background(), func(task *cpusched.Task) error {
				// Work that grows with i, so that run times spread over
				// a few buckets.
				for range 1000 * i {
					if err := task.Checkpoint(); err != nil {
						return err
					}
				}
				return nil
			}, cpusched.WithGroup(group))
			if err != nil {
				t.Fatal(err)
			}
			handles = append(handles, h)
		}
	}
	for _, h := range handles {
		if err := h.Wait(); err != nil {
			t.Fatal(err)
		}
	}

	families := gather(t, s)
	tests := []struct {
		metric, label string
		want          uint64
	}{
		{"cpusched_class_queue_wait_seconds", "normal", 2 * perGroup},
		{"cpusched_class_task_run_seconds", "normal", 2 * perGroup},
		{"cpusched_group_queue_wait_seconds", "a", perGroup},
		{"cpusched_group_queue_wait_seconds", OtherGroups, perGroup},
		{"cpusched_group_task_run_seconds", "a", perGroup},
		{"cpusched_group_task_run_seconds", OtherGroups, perGroup},
	}
	for _, tc := range tests {
		m := find(families, tc.metric, tc.label)
		if m == nil {
			t.Errorf("%s{%q}: missing", tc.metric, tc.label)
			continue
		}
		h := m.GetHistogram()
		if got := h.GetSampleCount(); got != tc.want {
			t.Errorf("%s{%q} count: got %d, want %d", tc.metric, tc.label, got, tc.want)
		}
		buckets := h.GetBucket()
		if got, want := len(buckets), cpusched.HistogramBuckets-1; got != want {
			t.Errorf("%s{%q} buckets: got %d, want %d (+Inf implicit)", tc.metric, tc.label, got, want)
		}
		for i := 1; i < len(buckets); i++ {
			if buckets[i].GetUpperBound() <= buckets[i-1].GetUpperBound() {
				t.Errorf("%s{%q} bucket %d: bound %v after %v, want rising", tc.metric, tc.label, i, buckets[i].GetUpperBound(), buckets[i-1].GetUpperBound())
			}
			if buckets[i].GetCumulativeCount() < buckets[i-1].GetCumulativeCount() {
				t.Errorf("%s{%q} bucket %d: count %d after %d, want cumulative", tc.metric, tc.label, i, buckets[i].GetCumulativeCount(), buckets[i-1].GetCumulativeCount())
			}
		}
		if n := len(buckets); n > 0 && buckets[n-1].GetCumulativeCount() > h.GetSampleCount() {
			t.Errorf("%s{%q}: last bucket %d above count %d", tc.metric, tc.label, buckets[n-1].GetCumulativeCount(), h.GetSampleCount())
		}
		if got, want := buckets[0].GetUpperBound(), 1e-6; got != want {
			t.Errorf("%s{%q} first bound: got %v, want %v", tc.metric, tc.label, got, want)
		}
		if h.GetSampleSum() < 0 {
			t.Errorf("%s{%q} sum: got %v, want >= 0", tc.metric, tc.label, h.GetSampleSum())
		}
	}
}

func TestLint(t *testing.T) {
	s := schedtest.NewScheduler(t)
	if err := s.Run(context.Background(), func(*cpusched.Task) error { return nil }, cpusched.WithGroup("g")); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.CollectAndLint(NewCollector(s))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestCollectAndCount(t *testing.T) {
	s := schedtest.NewScheduler(t)
	if err := s.SetGroupWeight("a", cpusched.DefaultGroupWeight); err != nil { // tracked; b is not
		t.Fatal(err)
	}
	for _, g := range []string{"", "a", "b"} {
		if err := s.Run(context.Background(), func(*cpusched.Task) error { return nil }, cpusched.WithGroup(g)); err != nil {
			t.Fatal(err)
		}
	}
	c := NewCollector(s)
	time.Sleep(110 * time.Millisecond) // an interval for cpusched_cpu_utilization
	tests := []struct {
		names []string
		want  int
	}{
		{nil, 31 + 4*5 + 3*8}, // scheduler-wide (4 of them http_shed_total's), 5 per class, 8 per group ("", a, (other))
		{[]string{"cpusched_tasks_ended_total"}, 4},
		{[]string{"cpusched_isolation_info"}, 1},
		{[]string{"cpusched_http_shed_total"}, 4},
		{[]string{"cpusched_class_queue_wait_seconds", "cpusched_class_task_run_seconds"}, 8},
		{[]string{"cpusched_group_weight"}, 3},
		{[]string{"cpusched_group_task_run_seconds"}, 3},
		{[]string{"cpusched_group_overrun_seconds"}, 3},
		{[]string{"cpusched_cpu_seconds_total", "cpusched_cpu_fallback_seconds_total"}, 2},
		{[]string{"cpusched_class_cpu_seconds_total"}, 4},
		{[]string{"cpusched_group_cpu_seconds_total"}, 3},
	}
	for _, tc := range tests {
		if got := testutil.CollectAndCount(c, tc.names...); got != tc.want {
			t.Errorf("CollectAndCount(%q): got %d, want %d", tc.names, got, tc.want)
		}
	}
}

// TestUtilization checks the utilization gauges against the scheduler's
// load: its one slot busy with Normal work reads about 1, Idle work about 0.
// A slot's time counts as far as the process got the CPU, so on a machine
// busy with other work the Normal bound is scaled by the share it got.
func TestUtilization(t *testing.T) {
	for _, tc := range []struct {
		class    cpusched.Class
		min, max float64
	}{{cpusched.ClassNormal, 0.7, math.Inf(1)}, {cpusched.ClassIdle, 0, 0.3}} {
		s := schedtest.NewScheduler(t)
		c := NewCollector(s)
		cpu0, wall0 := processCPU(t), time.Now()
		schedtest.Compute(t, s, 200*time.Millisecond, cpusched.WithClass(tc.class))
		if got := (processCPU(t) - cpu0).Seconds() / time.Since(wall0).Seconds(); got < 0.9 && tc.min > 0 {
			tc.min *= got
			t.Logf("%v: the process got %.2f of a CPU: want at least %.2f", tc.class, got, tc.min)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		app, cpu := find(families, "cpusched_application_utilization", ""), find(families, "cpusched_cpu_utilization", "")
		if app == nil || cpu == nil {
			t.Fatalf("%v: got application %v, cpu %v; want both", tc.class, app, cpu)
		}
		if v := value(app); v < tc.min || v > tc.max {
			t.Errorf("after 0.2s of %v work on the one slot: got cpusched_application_utilization %v, want %v..%v", tc.class, v, tc.min, tc.max)
		}
		if v := value(cpu); v < 0 {
			t.Errorf("got cpusched_cpu_utilization %v, want >= 0", v)
		}
	}
}

// TestRegister registers the collector in a pedantic registry, which checks
// that every collected metric matches a described Desc, and then again,
// which must fail as a duplicate.
func TestRegister(t *testing.T) {
	s := schedtest.NewScheduler(t)
	if err := s.Run(context.Background(), func(*cpusched.Task) error { return nil }, cpusched.WithGroup("g")); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(s)); err != nil {
		t.Fatalf("Register: got %v, want nil", err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Errorf("Gather: got %v, want nil", err)
	}
	var already prometheus.AlreadyRegisteredError
	if err := reg.Register(NewCollector(s)); !errors.As(err, &already) {
		t.Errorf("second Register: got %v, want an AlreadyRegisteredError", err)
	}
	// Two schedulers in one registry, each registered with a label that
	// tells them apart.
	reg = prometheus.NewPedanticRegistry()
	for _, name := range []string{"first", "second"} {
		wrapped := prometheus.WrapRegistererWith(prometheus.Labels{"scheduler": name}, reg)
		if err := wrapped.Register(NewCollector(schedtest.NewScheduler(t))); err != nil {
			t.Errorf("Register of scheduler %q with a label: got %v, want nil", name, err)
		}
	}
	if _, err := reg.Gather(); err != nil {
		t.Errorf("Gather of two schedulers: got %v, want nil", err)
	}
}

// TestCoreDoesNotImportPrometheus pins the reason this package exists: the
// core package must not depend on client_golang.
func TestCoreDoesNotImportPrometheus(t *testing.T) {
	gocmd, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	out, err := exec.Command(gocmd, "list", "-deps", "github.com/cpusched/cpusched").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for dep := range strings.FieldsSeq(string(out)) {
		if strings.HasPrefix(dep, "github.com/prometheus/") {
			t.Errorf("github.com/cpusched/cpusched depends on %s, want no Prometheus package", dep)
		}
	}
}

// gather collects s's metrics through a registry, as a scrape does.
func gather(t *testing.T, s *cpusched.Scheduler) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(s))
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	return families
}

// find returns the metric of the family name whose only label has value
// label ("" also matches a metric without labels), or nil.
func find(families []*dto.MetricFamily, name, label string) *dto.Metric {
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			value := ""
			if len(m.GetLabel()) > 0 {
				value = m.GetLabel()[0].GetValue()
			}
			if value == label {
				return m
			}
		}
	}
	return nil
}

// value returns a counter's or gauge's value.
func value(m *dto.Metric) float64 {
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// TestSeriesBoundedByTrackedGroups checks that the number of series does
// not grow with the number of group names: 10,000 one-task groups that
// SetGroupWeight never named are one group="(other)" series per metric.
func TestSeriesBoundedByTrackedGroups(t *testing.T) {
	s := schedtest.NewScheduler(t)
	for i := range 10_000 {
		if err := s.Run(context.Background(), func(*cpusched.Task) error { return nil }, cpusched.WithGroup(fmt.Sprint("user-", i))); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := testutil.CollectAndCount(NewCollector(s), "cpusched_group_tasks_submitted_total"), 2; got != want {
		t.Errorf("group series after 10,000 group names: got %d, want %d (\"\" and (other))", got, want)
	}
}

// processCPU returns the process's CPU time so far, user and system.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
