package cpusched

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cpusched/cpusched/internal/israce"
)

// groupNodes returns the number of run-queue group nodes, all classes.
func groupNodes(s *Scheduler) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i := range s.rq.queues {
		n += len(s.rq.queues[i].byName)
	}
	return n
}

// distinctGroups runs n one-task groups through s, from 4 goroutines so
// that some queue behind others, and returns what the heap grew by after a
// GC (negative when it shrank).
func distinctGroups(t testing.TB, s *Scheduler, n int) (heapGrowth int64) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	var wg sync.WaitGroup
	const submitters = 4
	for w := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += submitters {
				class := Class(i % 4)
				if err := s.Run(context.Background(), emptyTask, WithGroup("tenant-"+strconv.Itoa(i)), WithClass(class)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	return int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
}

// TestDistinctGroupsDoNotGrowMemory pins a leak: every distinct group name
// was kept forever with its run-queue nodes, counters and histograms
// (300,000 one-task groups grew the heap by 270 MB and made Stats take
// 445 ms). Untracked groups are now freed when their last task ends and
// counted together in Stats.OtherGroups. 1,000,000 groups (100,000 with
// -short or -race) must grow the heap by at most 32 MB; BenchmarkStatsAfterManyGroups
// times Stats after them.
func TestDistinctGroupsDoNotGrowMemory(t *testing.T) {
	n := 1_000_000
	if testing.Short() || israce.Enabled {
		n = 100_000
	}
	s := newTestScheduler(t, WithIsolation(IsolationNone), WithWorkers(2))
	if err := s.SetGroupWeight("gold", 300); err != nil {
		t.Fatal(err)
	}
	grew := distinctGroups(t, s, n)
	t.Logf("%d one-task groups: heap grew by %.1f MB", n, float64(grew)/(1<<20))
	if grew > 32<<20 {
		t.Errorf("%d one-task groups grew the heap by %.1f MB, want at most 32 MB", n, float64(grew)/(1<<20))
	}
	if got := groupNodes(s); got > 2*numQueues {
		t.Errorf("%d run-queue group nodes left, want only the tracked groups' (\"\" and gold)", got)
	}
	st := s.Stats()
	if len(st.Groups) != 2 {
		t.Errorf("Stats.Groups has %d entries, want 2 (\"\" and gold)", len(st.Groups))
	}
	if st.OtherGroups.Submitted != uint64(n) || st.OtherGroups.Ended != uint64(n) {
		t.Errorf("OtherGroups: submitted %d, ended %d; want %d each", st.OtherGroups.Submitted, st.OtherGroups.Ended, n)
	}
	checkHistograms(t, st)
}

// TestTrackedGroupKeepsStateWhileIdle checks that a group named by
// SetGroupWeight keeps its weight, its run-queue node (and so its lag) and
// its statistics while it has no task, and that an untracked group's
// tasks are counted in OtherGroups.
func TestTrackedGroupKeepsStateWhileIdle(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1))
	if err := s.SetGroupWeight("gold", 300); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Run(context.Background(), emptyTask, WithGroup("gold")); err != nil {
			t.Fatal(err)
		}
		if err := s.Run(context.Background(), emptyTask, WithGroup("once")); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	gold, once := s.rq.queues[qFair].byName["gold"], s.rq.queues[qFair].byName["once"]
	s.mu.Unlock()
	if gold == nil || gold.weight != groupWeight(300) {
		t.Errorf("idle tracked group's node = %+v, want kept with weight %d", gold, groupWeight(300))
	}
	if once != nil {
		t.Errorf("idle untracked group's node was kept: %+v", once)
	}
	st := s.Stats()
	g, ok := st.Groups["gold"]
	if !ok || g.Weight != 300 || g.Submitted != 2 || g.Ended != 2 || g.RunTimes.Count() != 2 {
		t.Errorf("Groups[gold] = %+v (present %v), want weight 300, 2 submitted, 2 ended, 2 run times", g, ok)
	}
	if _, ok := st.Groups["once"]; ok {
		t.Error("an untracked group has its own entry in Stats.Groups")
	}
	if o := st.OtherGroups; o.Submitted != 2 || o.Weight != DefaultGroupWeight {
		t.Errorf("OtherGroups = %+v, want 2 submitted at weight %d", o, DefaultGroupWeight)
	}
	// Tracking starts with SetGroupWeight, also for a group seen before.
	if err := s.SetGroupWeight("once", DefaultGroupWeight); err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background(), emptyTask, WithGroup("once")); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Groups["once"].Submitted; got != 1 {
		t.Errorf("Groups[once].Submitted after SetGroupWeight = %d, want 1 (counted from the call on)", got)
	}
	checkHistograms(t, s.Stats())
}

// TestGroupTrackedWhileRunning checks that a group SetGroupWeight names
// while its only task runs keeps its run-queue node when that task ends,
// like a group tracked before its first task, and that Stats counts its
// next task apart from the other groups'.
func TestGroupTrackedWhileRunning(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1))
	err := s.Run(context.Background(), func(*Task) error {
		return s.SetGroupWeight("late", 200)
	}, WithGroup("late"))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	late := s.rq.queues[qFair].byName["late"]
	s.mu.Unlock()
	if late == nil || late.weight != groupWeight(200) {
		t.Fatalf("node of a group tracked while it ran = %+v, want kept with weight %d", late, groupWeight(200))
	}
	if err := s.Run(context.Background(), emptyTask, WithGroup("late")); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	again := s.rq.queues[qFair].byName["late"]
	s.mu.Unlock()
	if again != late {
		t.Error("the tracked group's next task made a new node")
	}
	if g := s.Stats().Groups["late"]; g.Submitted != 1 {
		t.Errorf("Groups[late].Submitted = %d, want 1 (counted from SetGroupWeight on)", g.Submitted)
	}
}

// BenchmarkStatsAfterManyGroups times Stats after 1,000,000 distinct
// one-task groups have come and gone (it took 445 ms after 300,000 when
// every group was kept).
func BenchmarkStatsAfterManyGroups(b *testing.B) {
	s := benchScheduler(b, WithIsolation(IsolationNone), WithWorkers(2))
	distinctGroups(b, s, 1_000_000)
	b.ResetTimer()
	for b.Loop() {
		_ = s.Stats()
	}
}

func TestMaxGroupNameLen(t *testing.T) {
	// MaxGroupNameLen bytes are accepted, one more is refused with an
	// error that quotes the limit, by WithGroup and SetGroupWeight alike.
	s := newTestScheduler(t)
	for _, n := range []int{MaxGroupNameLen, MaxGroupNameLen + 1} {
		name := strings.Repeat("g", n)
		for what, err := range map[string]error{
			"WithGroup":      CheckTaskOptions(WithGroup(name)),
			"SetGroupWeight": s.SetGroupWeight(name, DefaultGroupWeight),
		} {
			want := ""
			if n > MaxGroupNameLen {
				want = fmt.Sprintf("is %d bytes, must be at most %d (MaxGroupNameLen)", n, MaxGroupNameLen)
			}
			if got := fmt.Sprint(err); want == "" && err != nil || want != "" && !strings.Contains(got, want) {
				t.Errorf("%s with a %d-byte name: got %v, want %q", what, n, err, cmp.Or(want, "nil"))
			}
		}
	}
}
