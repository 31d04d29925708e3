package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

// MinMedianRuns and MaxMedianRuns bound the runs Medians takes: one run is
// its own median, and the targets are stated on three.
const (
	MinMedianRuns = 2
	MaxMedianRuns = 20
)

// Medians is the rows of several runs side by side and the targets checked
// on their medians, as docs/grpc.md#the-results states them. A target's
// statistic is a ratio of two rows of one run, measured side by side at
// that run's rates (each run scales them to the heavy call it measures);
// its median is the median of the runs' ratios, not the ratio of the rows'
// medians, which would pair rows of different runs.
type Medians struct {
	// Runs are the runs' configurations (start times, rates), in the order
	// given.
	Runs []ReportConfig `json:"runs"`
	// Rows are the rows every run measured, in the first run's order.
	Rows []MedianRow `json:"rows"`
	// Targets are checked on the medians of the runs' statistics; each
	// Detail lists the runs' values.
	Targets []Target `json:"targets"`
}

// MedianRow is one row (a scenario under a policy) of every run.
type MedianRow struct {
	Scenario string `json:"scenario"`
	Policy   string `json:"policy"`
	// P99Ms is each run's p99, in the runs' order; MedianP99Ms their median.
	P99Ms       []float64 `json:"p99_ms"`
	MedianP99Ms float64   `json:"median_p99_ms"`
	// OddShare is the median share of the first replica (the odd one of
	// every scenario), 0..1.
	OddShare float64 `json:"odd_replica_share"`
}

// ReadMedians reads the JSON reports at paths (from -json or -out) and
// returns their medians. The runs must have measured the same rows with
// the same replicas.
func ReadMedians(paths []string) (*Medians, error) {
	if len(paths) < MinMedianRuns || len(paths) > MaxMedianRuns {
		return nil, fmt.Errorf("fleet: medians take %d..%d runs, got %d", MinMedianRuns, MaxMedianRuns, len(paths))
	}
	runs := make([]Report, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
		if err := json.Unmarshal(b, &runs[i]); err != nil {
			return nil, fmt.Errorf("fleet: %s is not a fleet report: %w", p, err)
		}
		if len(runs[i].Results) == 0 {
			return nil, fmt.Errorf("fleet: %s has no rows", p)
		}
	}
	return medians(runs)
}

// medians computes the Medians of runs.
func medians(runs []Report) (*Medians, error) {
	m := &Medians{}
	for _, r := range runs {
		m.Runs = append(m.Runs, r.Config)
	}
	common := make([][]Result, len(runs)) // each run's rows that every run measured
	for _, first := range runs[0].Results {
		rows := make([]Result, 0, len(runs))
		for _, r := range runs {
			i := slices.IndexFunc(r.Results, func(res Result) bool {
				return res.Scenario == first.Scenario && res.Policy == first.Policy
			})
			if i < 0 {
				break
			}
			if len(r.Results[i].Replicas) != len(first.Replicas) {
				return nil, fmt.Errorf("fleet: %s under %s has %d replicas in one run and %d in another",
					first.Scenario, first.Policy, len(first.Replicas), len(r.Results[i].Replicas))
			}
			rows = append(rows, r.Results[i])
		}
		if len(rows) < len(runs) {
			continue // not measured in every run
		}
		row := MedianRow{Scenario: first.Scenario, Policy: first.Policy}
		var shares []float64
		for i, r := range rows {
			row.P99Ms = append(row.P99Ms, r.P99Ms)
			shares = append(shares, r.Replicas[0].Share)
			common[i] = append(common[i], r)
		}
		row.MedianP99Ms, row.OddShare = median(row.P99Ms), median(shares)
		m.Rows = append(m.Rows, row)
	}
	if len(m.Rows) == 0 {
		return nil, errors.New("fleet: no row was measured in every run")
	}
	// Every run measured the same rows, so each run has the same targets
	// in the same order.
	perRun := make([][]Target, len(runs))
	for i := range runs {
		perRun[i] = targets(common[i])
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }
	for j, t := range perRun[0] {
		var vs []float64
		var texts []string
		for _, ts := range perRun {
			vs = append(vs, ts[j].Value)
			texts = append(texts, num(ts[j].Value))
		}
		t.Value = median(vs)
		t.Detail = fmt.Sprintf("median %s of %s; limit %s", num(t.Value), strings.Join(texts, ", "), num(t.Limit))
		m.Targets = append(m.Targets, t.check())
	}
	return m, nil
}

// median returns the median of vs (the mean of the middle two for an even
// count); vs is not changed.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// WriteTable writes the rows, each run's p99 and their median, and the
// targets checked on the medians.
func (m *Medians) WriteTable(w io.Writer) error {
	ew := report.NewErrWriter(w)
	var started []string
	for _, c := range m.Runs {
		started = append(started, c.Started.UTC().Format("2006-01-02 15:04"))
	}
	ew.Printf("medians of %d runs, started %s UTC\n\n", len(m.Runs), strings.Join(started, ", "))
	head := []string{"scenario", "policy"}
	for i := range m.Runs {
		head = append(head, fmt.Sprintf("p99 run %d", i+1))
	}
	head = append(head, "median p99", "odd replica's share")
	t := report.NewTable(head...)
	for _, r := range m.Rows {
		cells := []string{r.Scenario, r.Policy}
		for _, v := range r.P99Ms {
			cells = append(cells, report.Ms(v))
		}
		cells = append(cells, report.Ms(r.MedianP99Ms), report.Pct(100*r.OddShare))
		t.Row(cells...)
	}
	if err := t.Write(ew); err != nil {
		return err
	}
	ew.Printf("(p99s in ms; the odd replica's share: the median of the first replica's, the weak one, the batch one or the neighbour's;\n the targets: the median of each run's ratio of its rows, or its errors)\n")
	writeTargets(ew, "targets, on the medians of the runs' ratios", m.Targets)
	return ew.Err()
}
