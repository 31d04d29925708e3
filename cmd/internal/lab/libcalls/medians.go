// The medians of the runs and the targets checked on them.

package libcalls

import (
	"fmt"
	"slices"
)

// The project's targets for library calls through httpsched in the
// default mode (docs/lab/libcalls.md): each kind's calls at least
// TargetPctOfDirect of their direct throughput, with the probe's p99 at
// most TargetP99XIdle times the idle step's, on the medians of three runs.
const (
	TargetPctOfDirect = 90
	TargetP99XIdle    = 1.5
)

// TargetAutoP99XSched is the project's target for a whole server wrapped
// in httpsched.Auto: the probe's p99 at most this many times the sched
// step's, where the heavy routes were wrapped by hand, on the median of
// the runs.
const TargetAutoP99XSched = 1.5

// StepMedian is one step's figures, each the median over the runs that
// measured the step. A ratio's median is the median of the runs' ratios,
// each of two steps of one run, not the ratio of the medians, which would
// pair steps of different runs.
type StepMedian struct {
	Step     string  `json:"step"`
	Runs     int     `json:"runs"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	P999Ms   float64 `json:"p999_ms"`
	ProbeRPS float64 `json:"probe_rps"`
	P99XIdle float64 `json:"p99_x_idle"`
	// The auto step's: the medians over the runs that measured the sched
	// (the floor) step too; 0 for none.
	P99XSched float64      `json:"p99_x_sched,omitempty"`
	P99XFloor float64      `json:"p99_x_floor,omitempty"`
	Heavy     []KindMedian `json:"heavy,omitempty"`
}

// KindMedian is one kind's median calls per second in a step and, beside
// the direct step, their median percentage of it.
type KindMedian struct {
	Kind        string   `json:"kind"`
	OpsPerS     float64  `json:"ops_per_s"`
	PctOfDirect *float64 `json:"pct_of_direct,omitempty"`
}

// Target is one target checked on the median of the runs' values.
type Target struct {
	What   string    `json:"what"`   // "gzip calls through httpsched, % of direct"
	Values []float64 `json:"values"` // each run's, in order
	Median float64   `json:"median"`
	Limit  float64   `json:"limit"`
	AtMost bool      `json:"at_most"` // the median must be <= Limit, else >= Limit
	Met    bool      `json:"met"`
}

// medians returns the median of each step over the runs, in the steps'
// order.
func medians(runs []RunResult, kinds []string) []StepMedian {
	var out []StepMedian
	for _, step := range []string{StepIdle, StepDirect, StepSched, StepAuto, StepFloor} {
		var steps []*StepResult
		for i := range runs {
			if s := runs[i].Step(step); s != nil {
				steps = append(steps, s)
			}
		}
		if len(steps) == 0 {
			continue
		}
		of := func(f func(*StepResult) float64) float64 {
			vs := make([]float64, len(steps))
			for i, s := range steps {
				vs[i] = f(s)
			}
			return median(vs)
		}
		m := StepMedian{
			Step: step, Runs: len(steps),
			P50Ms:    of(func(s *StepResult) float64 { return s.Probe.P50Ms }),
			P99Ms:    of(func(s *StepResult) float64 { return s.Probe.P99Ms }),
			P999Ms:   of(func(s *StepResult) float64 { return s.Probe.P999Ms }),
			ProbeRPS: of(func(s *StepResult) float64 { return s.Probe.RPS }),
			P99XIdle: of(func(s *StepResult) float64 { return s.P99XIdle }),
		}
		if step == StepAuto {
			m.P99XSched = median(positive(steps, func(s *StepResult) float64 { return s.P99XSched }))
			m.P99XFloor = median(positive(steps, func(s *StepResult) float64 { return s.P99XFloor }))
		}
		if pathFor(step) != "" || step == StepFloor {
			for _, kind := range kinds {
				km := KindMedian{Kind: kind, OpsPerS: of(func(s *StepResult) float64 { return kindOps(s, kind) })}
				if pcts := pctsOfDirect(steps, kind); len(pcts) > 0 {
					pct := median(pcts)
					km.PctOfDirect = &pct
				}
				m.Heavy = append(m.Heavy, km)
			}
		}
		out = append(out, m)
	}
	return out
}

// positive returns f of each of steps where it is above 0 (a ratio the
// run could compute).
func positive(steps []*StepResult, f func(*StepResult) float64) []float64 {
	var vs []float64
	for _, s := range steps {
		if v := f(s); v > 0 {
			vs = append(vs, v)
		}
	}
	return vs
}

func kindOps(s *StepResult, kind string) float64 {
	if k := s.Kind(kind); k != nil {
		return k.OpsPerS
	}
	return 0
}

// pctsOfDirect returns the steps' percentages of direct for kind, where
// they have one.
func pctsOfDirect(steps []*StepResult, kind string) []float64 {
	var pcts []float64
	for _, s := range steps {
		if k := s.Kind(kind); k != nil && k.PctOfDirect != nil {
			pcts = append(pcts, *k.PctOfDirect)
		}
	}
	return pcts
}

// targets checks the targets on the runs' sched steps (each kind's
// percentage of direct, then the probe's p99 over idle) and, where every
// run measured it beside the sched step, on their auto steps (the probe's
// p99 over the sched step's).
func targets(runs []RunResult, kinds []string) []Target {
	var sched, auto []*StepResult
	for i := range runs {
		if s := runs[i].Step(StepSched); s != nil {
			sched = append(sched, s)
		}
		if s := runs[i].Step(StepAuto); s != nil {
			auto = append(auto, s)
		}
	}
	if len(sched) == 0 {
		return nil
	}
	var out []Target
	for _, kind := range kinds {
		if pcts := pctsOfDirect(sched, kind); len(pcts) == len(sched) {
			out = append(out, newTarget(fmt.Sprintf("%s calls through httpsched, %% of direct", kind), pcts, TargetPctOfDirect, false))
		}
	}
	var p99x []float64
	for _, s := range sched {
		p99x = append(p99x, s.P99XIdle)
	}
	out = append(out, newTarget("probe p99 beside them, x idle", p99x, TargetP99XIdle, true))
	if x := positive(auto, func(s *StepResult) float64 { return s.P99XSched }); len(x) > 0 && len(x) == len(runs) {
		out = append(out, newTarget("probe p99 with the whole server under httpsched.Auto, x sched", x, TargetAutoP99XSched, true))
	}
	return out
}

func newTarget(what string, values []float64, limit float64, atMost bool) Target {
	t := Target{What: what, Values: values, Median: median(values), Limit: limit, AtMost: atMost}
	if atMost {
		t.Met = t.Median <= limit
	} else {
		t.Met = t.Median >= limit
	}
	return t
}

// median returns the median of vs (the mean of the middle two for an even
// count), 0 for none; vs is not changed.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
