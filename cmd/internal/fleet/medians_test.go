package fleet

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// neighborRun returns a run of the neighbor scenario's three rows with
// those p99s (round robin, weighted, CPU-fed) and the neighbour's replica
// given 3 of 10 calls under the weighted balancer.
func neighborRun(t *testing.T, rr, wrr, cpu time.Duration) Report {
	t.Helper()
	return Report{Results: []Result{
		fakeRow(t, ScenarioNeighbor, PolicyRoundRobin, rr, []int{10, 10, 10}, 0),
		fakeRow(t, ScenarioNeighbor, PolicyWRR, wrr, []int{6, 12, 12}, 0),
		fakeRow(t, ScenarioNeighbor, PolicyWRRCPU, cpu, []int{10, 10, 10}, 0),
	}}
}

// TestMedians: the targets are checked on the median of each run's
// statistic, not run by run, and not on the rows' medians.
func TestMedians(t *testing.T) {
	const ms = time.Millisecond
	runs := []Report{
		neighborRun(t, 70*ms, 100*ms, 80*ms), // weighted missed in this run
		neighborRun(t, 60*ms, 35*ms, 60*ms),
		neighborRun(t, 80*ms, 45*ms, 140*ms),
	}
	m, err := medians(runs)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Rows) != 3 || len(m.Runs) != 3 {
		t.Fatalf("%d rows of %d runs, want 3 of 3", len(m.Rows), len(m.Runs))
	}
	for i, want := range []float64{70, 45, 80} {
		if got := m.Rows[i].MedianP99Ms; got < 0.99*want || got > 1.01*want {
			t.Errorf("%s: median p99 %v, want about %v (of %v)", m.Rows[i].Policy, got, want, m.Rows[i].P99Ms)
		}
	}
	if got := m.Rows[1].OddShare; got < 0.19 || got > 0.21 {
		t.Errorf("the neighbour's replica's median share under weighted: %v, want 0.2", got)
	}
	if len(m.Targets) != 3 {
		t.Fatalf("%d targets, want the neighbor scenario's 3: %+v", len(m.Targets), m.Targets)
	}
	for _, tg := range m.Targets {
		if !tg.Held {
			t.Errorf("%s: not held on the medians (%s)", tg.Target, tg.Detail)
		}
	}
	// The statistic is each run's ratio of its own rows, and the target
	// is checked on their median: here 0.583, where the rows' medians
	// (45 against 70 ms) would give 0.64.
	if d := m.Targets[0].Detail; !strings.Contains(d, "median 0.583 of 1.43, 0.583, 0.562; limit 0.7") {
		t.Errorf("detail %q, want the median of the runs' ratios", d)
	}
	// One run's miss decides nothing; two do.
	runs[2] = neighborRun(t, 80*ms, 60*ms, 140*ms)
	if m, err := medians(runs); err != nil || m.Targets[0].Held {
		t.Errorf("ratios 1.43, 0.583 and 0.75: %v, %+v; want the 0.7x target missed", err, m.Targets[0])
	}

	var b bytes.Buffer
	if err := m.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"medians of 3 runs", "p99 run 3", "median p99", "targets, on the medians of the runs' ratios:", "NOT held"} {
		if got := strings.Contains(b.String(), want); got != (want != "NOT held") {
			t.Errorf("table has %q: %v, want %v:\n%s", want, got, !got, b.String())
		}
	}
}

func TestMedianOfEvenCount(t *testing.T) {
	vs := []float64{4, 1, 3, 2}
	if got := median(vs); got != 2.5 {
		t.Errorf("median of 1..4: %v, want 2.5", got)
	}
	if vs[0] != 4 {
		t.Errorf("median sorted its argument: %v", vs)
	}
}

// TestMediansRows: a row not measured in every run is left out; runs with
// no row in common, or whose rows have different replicas, are errors.
func TestMediansRows(t *testing.T) {
	const ms = time.Millisecond
	a := neighborRun(t, 70*ms, 50*ms, 80*ms)
	b := neighborRun(t, 70*ms, 50*ms, 80*ms)
	b.Results = b.Results[:2]
	m, err := medians([]Report{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Rows) != 2 || len(m.Targets) != 2 {
		t.Errorf("%d rows and %d targets, want the 2 rows both runs measured and their 2 targets", len(m.Rows), len(m.Targets))
	}

	c := Report{Results: []Result{fakeRow(t, ScenarioBatch, PolicyRoundRobin, ms, []int{1, 1, 1}, 0)}}
	if _, err := medians([]Report{a, c}); err == nil || !strings.Contains(err.Error(), "no row was measured in every run") {
		t.Errorf("runs without a row in common: %v", err)
	}
	d := neighborRun(t, 70*ms, 50*ms, 80*ms)
	d.Results[0] = fakeRow(t, ScenarioNeighbor, PolicyRoundRobin, 70*ms, []int{10, 10}, 0)
	if _, err := medians([]Report{a, d}); err == nil || !strings.Contains(err.Error(), "3 replicas in one run and 2 in another") {
		t.Errorf("rows of 3 and 2 replicas: %v", err)
	}
}

func TestReadMediansErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	var b bytes.Buffer
	rep := neighborRun(t, time.Millisecond, time.Millisecond, time.Millisecond)
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "run.txt")
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(text, []byte("fleet: 3 replicas\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte(`{"results": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		paths []string
		want  string
	}{
		{[]string{good}, "medians take 2..20 runs, got 1"},
		{[]string{good, filepath.Join(dir, "missing.json")}, "missing.json: no such file"},
		{[]string{good, text}, "run.txt is not a fleet report"},
		{[]string{good, empty}, "empty.json has no rows"},
	} {
		if _, err := ReadMedians(tt.paths); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.paths, err, tt.want)
		}
	}
	if m, err := ReadMedians([]string{good, good}); err != nil || len(m.Rows) != 3 {
		t.Errorf("a run twice: %v, %v", m, err)
	}
}
