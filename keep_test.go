package cpusched

import (
	"fmt"
	"testing"
	"time"
)

// callsBesideYielding is the load that showed short tasks and calls that
// cannot yield alternating one for one (docs/measurements/slot-hold.md):
// one group, a closed-loop client of 1 ms tasks that yield ("render") and
// one of 20 ms calls that cannot ("login"), each of its kind; the render
// client pauses up to pause between tasks.
func callsBesideYielding(pause time.Duration) []simClient {
	return []simClient{
		{group: "a", run: time.Millisecond, yields: true, kind: "render", maxPause: pause},
		{group: "a", run: 20 * time.Millisecond, kind: "login"},
	}
}

// TestKeptSlotSharesWithCalls: with one slot, a render that ended gave
// the slot to the waiting login at once, and the render's client, back a
// moment later, waited out the whole login: renders and logins alternated
// one for one, the renders 5% of the work (1 ms against 20). With the slot
// kept for the render's next task, the group's two clients share the slot
// as EEVDF shares it between tasks: the renders' share must be at least
// 30%. Where the client pauses longer than the slot is kept, the slot goes
// to the login at its time: kept slots run out, and the work goes on.
func TestKeptSlotSharesWithCalls(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprint(workers, " workers"), func(t *testing.T) {
			clients := callsBesideYielding(0)
			for range workers - 1 {
				clients = append(clients, clients[1]) // a login client per slot
			}
			r := simRun(t, simSpec{workers: workers, clients: clients, total: 4 * time.Second, seed: 1})
			share := float64(r.byKind["a/yield"]) / float64(r.work["a"])
			t.Logf("renders %.1f%% of the work; %d slots kept, %d taken; work by kind %v", 100*share, r.kept, r.keptTaken, r.byKind)
			if share < 0.3 {
				t.Errorf("renders got %.1f%% of the work beside calls that cannot yield, want >= 30%%", 100*share)
			}
		})
	}
	t.Run("calls in a group of their own", func(t *testing.T) {
		// The lane serves a group's short tasks first; calls in a group
		// of their own share by the groups' weights, kept slots or not.
		for _, weights := range []map[string]int{{"a": 100, "b": 100}, {"a": 100, "b": 300}} {
			clients := callsBesideYielding(0)
			clients[1].group = "b"
			r := simRun(t, simSpec{workers: 1, weights: weights, clients: clients, total: 4 * time.Second, seed: 1})
			want := float64(weights["b"]) / float64(weights["a"]+weights["b"])
			got := r.share("b")
			t.Logf("weights %v: the calls' group got %.1f%% of the work; %d slots kept, %d taken", weights, 100*got, r.kept, r.keptTaken)
			if got < 0.9*want || got > 1.1*want {
				t.Errorf("weights %v: the calls' group got %.1f%% of the work, want %.1f%% (+-10%%)", weights, 100*got, 100*want)
			}
		}
	})
	t.Run("the kept time is charged", func(t *testing.T) {
		// The render client pauses up to 0.9 ms between tasks, within the
		// kept time: the slot stands kept for about 0.45 ms at each
		// render's end, nearly half the renders' time again. Charged to
		// nobody, the calls' group got its half of the time charged, and
		// the slot's kept time went to the renders besides: 41% of the
		// slot's time. Charged to the render that takes the slot, the
		// groups share the slot's time by weight.
		clients := callsBesideYielding(900 * time.Microsecond)
		clients[1].group = "b"
		total := 4 * time.Second
		r := simRun(t, simSpec{workers: 1, weights: map[string]int{"a": 100, "b": 100}, clients: clients, total: total, seed: 1})
		got := float64(r.work["b"]) / float64(total)
		t.Logf("the calls' group ran %.1f%% of the slot's time, the renders' %.1f%%; %d slots kept, %d taken",
			100*got, 100*float64(r.work["a"])/float64(total), r.kept, r.keptTaken)
		if r.keptTaken < r.kept/2 {
			t.Errorf("%d of %d kept slots taken: want most, the renders' pauses being within the kept time", r.keptTaken, r.kept)
		}
		if got < 0.46 {
			t.Errorf("the calls' group ran %.1f%% of the slot's time at equal weights, want >= 46%%", 100*got)
		}
	})
	t.Run("pauses past the kept time", func(t *testing.T) {
		// Renders that come back 0-10 ms after the last ended, as tasks
		// arriving at random do: a kept slot mostly stands idle, so the
		// scheduler keeps one at one chance in keepProbe, and the slot
		// stays busy.
		r := simRun(t, simSpec{workers: 1, clients: callsBesideYielding(10 * keepMax), total: 4 * time.Second, seed: 1})
		renders := int(r.byKind["a/yield"] / time.Millisecond)
		t.Logf("%d slots kept, %d taken, at %d renders' ends; work by kind %v", r.kept, r.keptTaken, renders, r.byKind)
		if r.kept == 0 || r.keptTaken >= r.kept {
			t.Errorf("%d slots kept, %d taken by a new task: want some kept, and some run out", r.kept, r.keptTaken)
		}
		if r.kept > uint64(renders)/4 {
			t.Errorf("%d slots kept at %d renders' ends: want at most a quarter where they mostly stand idle", r.kept, renders)
		}
		if busy := r.work["a"]; busy < 4*time.Second*98/100 {
			t.Errorf("the slot ran %v of work in 4s: want it busy >= 98%% of the time, kept slots included", busy)
		}
	})
}
