package autoroute

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/leakcheck"
	"github.com/cpusched/cpusched/internal/osprio"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func TestSampling(t *testing.T) {
	tb := New(time.Millisecond, 8)
	r := tb.Route("/a")
	var sampled []int
	for i := 1; i <= 600; i++ {
		if r.Next() {
			sampled = append(sampled, i)
		}
	}
	// No sample recorded: its average is 0, under an eighth of the
	// threshold.
	if want := []int{1, 2, 3, 4, 256, 512}; fmt.Sprint(sampled) != fmt.Sprint(want) {
		t.Errorf("light route sampled requests %v, want %v", sampled, want)
	}
	r.Record(int64(time.Millisecond / 4))
	sampled = sampled[:0]
	for i := 601; i <= 700; i++ {
		if r.Next() {
			sampled = append(sampled, i)
		}
	}
	want := []int{608, 640, 672}
	if fmt.Sprint(sampled) != fmt.Sprint(want) {
		t.Errorf("light route sampled requests %v, want %v", sampled, want)
	}
	r.Record(int64(4 * time.Millisecond)) // the lower of the two: 0.25 ms, light
	if r.Heavy() {
		t.Fatal("heavy after samples of 0.25 and 4 ms, want light: the lower of the first two decides")
	}
	r.Record(int64(4 * time.Millisecond)) // 0.25 + 3.75/4 ms: heavy
	sampled = sampled[:0]
	for i := 701; i <= 716; i++ {
		if r.Next() {
			sampled = append(sampled, i)
		}
	}
	if want := []int{704, 708, 712, 716}; fmt.Sprint(sampled) != fmt.Sprint(want) {
		t.Errorf("heavy route sampled requests %v, want %v", sampled, want)
	}
}

func TestHysteresis(t *testing.T) {
	const ms = int64(time.Millisecond)
	tb := New(time.Millisecond, 8)
	r := tb.Route("/a")
	steps := []struct {
		cpu       int64
		avg       int64
		wantHeavy bool
	}{
		{ms * 3, ms * 3, false}, // the first sample seeds the average and decides nothing
		{ms / 2, ms / 2, false}, // the second decides, from the lower of the two
		{ms * 5 / 2, ms, true},  // a quarter of the way: 0.5 + 2/4 = 1 ms, the threshold
		{ms / 2, ms * 7 / 8, true},
		{0, ms * 21 / 32, true},
		{0, ms * 63 / 128, false}, // under half the threshold
		{ms, ms * 317 / 512, false},
	}
	for i, s := range steps {
		r.Record(s.cpu)
		st := r.Stats()
		if st.CPU != time.Duration(s.avg) || st.Heavy != s.wantHeavy {
			t.Fatalf("sample %d (%v): average %v heavy %v, want %v %v", i, time.Duration(s.cpu), st.CPU, st.Heavy, time.Duration(s.avg), s.wantHeavy)
		}
	}
	if st := r.Stats(); st.Moves != 2 || st.Sampled != uint64(len(steps)) {
		t.Errorf("moves %d sampled %d, want 2 and %d", st.Moves, st.Sampled, len(steps))
	}
	r.Record(-1) // a reading that failed
	if st := r.Stats(); st.Sampled != uint64(len(steps)) {
		t.Errorf("a negative reading was recorded: %d samples", st.Sampled)
	}
}

func TestBound(t *testing.T) {
	tb := New(time.Millisecond, 2)
	a, b := tb.Route("a"), tb.Route("b")
	c, d := tb.Route("c"), tb.Route("d")
	if a == b || c != d || c.Name() != OtherRoute || tb.Route("a") != a {
		t.Fatalf("routes a %p b %p c %p (%s) d %p", a, b, c, c.Name(), d)
	}
	if n := len(tb.Stats()); n != 2 {
		t.Errorf("%d routes in Stats before the other route's first request, want 2", n)
	}
	c.Next()
	st := tb.Stats()
	if len(st) != 3 || st[2].Route != OtherRoute || st[2].Requests != 1 {
		t.Errorf("Stats: %+v", st)
	}
}

func TestStatsTask(t *testing.T) {
	// A route's figures carry what Task made for it, once it has.
	tb := New(time.Millisecond, 8)
	r := tb.Route("a")
	tb.Route("b")
	if st := r.Stats(); st.Task != nil {
		t.Errorf("before Task: Stats().Task %v, want nil", st.Task)
	}
	r.Task(func(rt *Route) any { return "a's" })
	if st := tb.Stats(); st[0].Task != "a's" || st[1].Task != nil {
		t.Errorf("after a's Task: a's Task %v, b's %v; want \"a's\" and nil", st[0].Task, st[1].Task)
	}
}

func TestChecks(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{CheckThreshold(9 * time.Microsecond), "9µs is out of range (10µs..10s)"},
		{CheckThreshold(11 * time.Second), "11s is out of range (10µs..10s)"},
		{CheckMaxRoutes(0), "0 is out of range (1..65536)"},
		{CheckMaxRoutes(1<<16 + 1), "65537 is out of range (1..65536)"},
	} {
		if c.err == nil || c.err.Error() != c.want {
			t.Errorf("got %v, want %q", c.err, c.want)
		}
	}
	if CheckThreshold(MinThreshold) != nil || CheckThreshold(MaxThreshold) != nil || CheckMaxRoutes(1) != nil || CheckMaxRoutes(MaxMaxRoutes) != nil {
		t.Error("a bound of the range was refused")
	}
}

func TestMeasure(t *testing.T) {
	if !Measurable() {
		t.Skip("no thread CPU clocks")
	}
	tb := New(time.Millisecond, 8)
	spinning, sleeping := tb.Route("spin"), tb.Route("sleep")
	b := Lock()
	for osprio.ThreadCPU()-b.cpu < int64(5*time.Millisecond) {
	}
	spinning.Unlock(b)
	b = Lock()
	time.Sleep(5 * time.Millisecond)
	sleeping.Unlock(b)
	if st := spinning.Stats(); st.CPU < 5*time.Millisecond || st.CPU > 50*time.Millisecond {
		t.Errorf("5 ms of spinning measured %v", st.CPU)
	}
	if st := sleeping.Stats(); st.CPU > time.Millisecond {
		t.Errorf("5 ms of sleep measured %v", st.CPU)
	}
}

// TestStress drives one table from many goroutines at once (new routes
// past the bound, samples, Task, Stats) under -race, with a watchdog that
// dumps the goroutines instead of hanging.
func TestStress(t *testing.T) {
	tb := New(100*time.Microsecond, 16)
	var made atomic.Int32
	defer leakcheck.Watchdog(t, time.Minute)()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 5000 {
				r := tb.Route(fmt.Sprint(rng.IntN(40)))
				switch rng.IntN(5) {
				case 0:
					r.Record(rng.Int64N(int64(time.Millisecond)))
				case 1:
					if r.Task(func(*Route) any { made.Add(1); return r.Name() }).(string) != r.Name() {
						t.Error("Task gave another route's value")
					}
				case 2:
					tb.Stats()
				case 3:
					if r.Next() {
						r.Unlock(Lock())
					}
				default:
					r.End(Begin())
				}
			}
		}()
	}
	wg.Wait()
	st := tb.Stats()
	if len(st) != 17 || st[16].Route != OtherRoute {
		t.Errorf("%d routes, the last %q: want 16 and %s", len(st), st[len(st)-1].Route, OtherRoute)
	}
	seen := map[string]bool{}
	for _, r := range st {
		if seen[r.Route] {
			t.Errorf("route %q twice", r.Route)
		}
		seen[r.Route] = true
	}
}
