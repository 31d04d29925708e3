package soak

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

// tableRows is about how many rows the samples table has: one every
// len(samples)/tableRows samples, and the last one.
const tableRows = 20

// WriteTable writes the samples table (about 20 rows, each with the mean
// request rate since the previous row), the outcome counts per case, the
// unexpected outcomes kept, the checks and the verdict.
func (r *Report) WriteTable(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "soak of the demo server (%s): %s, mix %s req/s (at most %d in flight), distinct groups %s req/s\n\n",
		r.Server, fmtT(r.Config.ElapsedS)+" s", report.Num(r.Config.Rate), r.Config.Concurrency, report.Num(r.Config.GroupRate))
	t := report.NewTable("t (s)", "rss MB", "goroutines", "threads", "fds", "groups", "/metrics KB", "req/s")
	step := max(1, int(math.Ceil(float64(len(r.Samples))/tableRows)))
	from := 0
	for i, s := range r.Samples {
		if (i+1)%step != 0 && i != len(r.Samples)-1 {
			continue
		}
		var rate float64
		for _, x := range r.Samples[from : i+1] {
			rate += x.RequestsPerS
		}
		rate /= float64(i + 1 - from)
		from = i + 1
		t.Row(fmtT(s.T), fmt.Sprintf("%.1f", float64(s.RSSBytes)/(1<<20)), count(s.Goroutines),
			report.Num(float64(s.Threads)), report.Num(float64(s.FDs)), count(s.Groups), kb(s.MetricsBytes), fmt.Sprintf("%.0f", rate))
	}
	_ = t.Write(&b) // a bytes.Buffer does not fail

	b.WriteString("\n")
	rt := report.NewTable("request", "want", "got")
	for _, c := range r.Requests {
		rt.Row(c.Case, strings.Join(c.Want, "|"), outcomes(c.Counts))
	}
	_ = rt.Write(&b)
	if r.UnexpectedTotal > 0 {
		fmt.Fprintf(&b, "\nunexpected outcomes: %d; the first %d:\n", r.UnexpectedTotal, len(r.Unexpected))
		for _, u := range r.Unexpected {
			fmt.Fprintf(&b, "  %5.1f s  %s %s: %s  %s\n", u.AtS, u.Method, u.Target, u.Outcome, oneLine(u.Detail))
		}
	}

	fmt.Fprintf(&b, "\nrule: %s\n\n", r.Rule)
	for _, c := range r.Checks {
		verdict := "PASS"
		if !c.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(&b, "%-10s %s  %s\n", c.Name, verdict, c.Detail)
	}
	if r.Pass {
		fmt.Fprintf(&b, "\nverdict: PASS\n")
	} else {
		fmt.Fprintf(&b, "\nverdict: FAIL (%s)\n", strings.Join(r.Failed(), ", "))
	}
	_, err := w.Write(b.Bytes())
	return err
}

// Failed returns the names of the checks that failed.
func (r *Report) Failed() []string {
	var names []string
	for _, c := range r.Checks {
		if !c.Pass {
			names = append(names, c.Name)
		}
	}
	return names
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// outcomes writes counts as "200 x 1,234, cancelled x 5", status codes
// first.
func outcomes(counts map[string]int64) string {
	if len(counts) == 0 {
		return "-"
	}
	keys := slices.Sorted(maps.Keys(counts))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " x " + report.Num(float64(counts[k]))
	}
	return strings.Join(parts, ", ")
}

func count(n int) string {
	if n < 0 {
		return "-"
	}
	return report.Num(float64(n))
}

func kb(n int) string {
	if n < 0 {
		return "-"
	}
	return report.Num(math.Round(float64(n) / 1024))
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return s
}
