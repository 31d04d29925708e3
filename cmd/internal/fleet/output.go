package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

// The files of Config.OutDir.
const (
	JSONFile  = "fleet.json"
	P99Plot   = "fleet.png"
	SharePlot = "fleet-share.png"
)

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the calls' table, the replicas' table, the skipped
// scenarios and the targets.
func (r *Report) WriteTable(w io.Writer) error {
	ew := report.NewErrWriter(w)
	c := r.Config
	var mix []string
	for _, m := range c.Mix {
		mix = append(mix, fmt.Sprintf("%s %s (%d CRC passes)", m.Method, report.Pct(100*m.Share), m.Passes))
	}
	ew.Printf("fleet: %d replicas, calls %s, due %s; deadline %s\n",
		c.Replicas, strings.Join(mix, ", "), arrivalsText(c.Arrivals), seconds(c.TimeoutS))
	ew.Printf("%s measured per row in %d rounds of %s, the policies in turn, each segment on fresh replicas after %s of warm-up\n",
		seconds(c.DurationS), c.Rounds, seconds(c.SegmentS), seconds(c.WarmupS))
	if c.HeavyMs > 0 {
		ew.Printf("rates: quota %s, batch %s, neighbor %s calls/s; the defaults (%d, %d, %d) scaled to a heavy call's work here, %s ms against %s\n",
			report.Num(math.Round(c.QuotaRate)), report.Num(math.Round(c.BatchRate)), report.Num(math.Round(c.NeighborRate)),
			DefaultQuotaRate, DefaultBatchRate, DefaultNeighborRate, report.Ms(c.HeavyMs), report.Ms(ReferenceHeavy.Seconds()*1e3))
	}
	if r.Cgroup != "" {
		ew.Printf("cgroups: each replica in its own, on %s\n", r.Cgroup)
	}
	for _, n := range r.Notes {
		ew.Printf("note: %s\n", n)
	}
	ew.Printf("\n")

	calls := report.NewTable("scenario", "policy", "method", "rate", "req/s", "p50", "p99", "p99.9", "max", "errors", "cpu busy", "client cpu")
	for _, res := range r.Results {
		calls.Row(res.Scenario, res.Policy, "all", report.Num(res.Rate), report.Num(math.Round(res.ReqS)),
			report.Ms(res.P50Ms), report.Ms(res.P99Ms), report.Ms(res.P999Ms), report.Ms(res.MaxMs),
			report.Num(float64(res.Errors)), pct(res.MachineBusyPct), num(res.ClientCPU))
		for _, m := range res.Methods {
			calls.Row("", "", m.Method, "", report.Num(math.Round(m.ReqS)),
				report.Ms(m.P50Ms), report.Ms(m.P99Ms), report.Ms(m.P999Ms), report.Ms(m.MaxMs),
				report.Num(float64(m.Errors)))
		}
	}
	if err := calls.Write(ew); err != nil {
		return err
	}
	ew.Printf("(latencies in ms from each call's due time; errors: calls that failed, most past their deadline;\n cpu busy: the whole machine's; client cpu: this process's, in CPUs)\n\n")

	replicas := report.NewTable("scenario", "policy", "replica", "cpu limit", "procs/workers", "beside", "share", "errors", "p50", "p99",
		"cpu used", "throttled", "reported app", "reported cpu", "heavy run", "heavy wait", "passes/s")
	for _, res := range r.Results {
		for _, rep := range res.Replicas {
			limit, beside, passes := "-", "", rep.BatchPassesPerS
			if rep.CPULimit > 0 {
				limit = strconv.FormatFloat(rep.CPULimit, 'g', 3, 64)
			}
			switch {
			case rep.Batch:
				beside = "batch"
			case rep.Neighbor:
				beside, passes = "neighbor", rep.NeighborPassesPerS
			}
			replicas.Row(res.Scenario, res.Policy, strconv.Itoa(rep.ID), limit,
				fmt.Sprintf("%d/%d", rep.GOMAXPROCS, rep.Workers), beside, report.Pct(100*rep.Share),
				report.Num(float64(rep.Errors)), num(rep.P50Ms), num(rep.P99Ms), num(rep.CPUUsed), pct(rep.ThrottledPct),
				num(rep.ReportedApp), num(rep.ReportedCPU), num(rep.HeavyRunMs), num(rep.HeavyQueueWaitMs),
				report.Num(math.Round(passes)))
		}
	}
	if err := replicas.Write(ew); err != nil {
		return err
	}
	ew.Printf("(beside: a batch job in its scheduler, or a neighbour in its cgroup; cpu used: CPUs over the window; throttled: the quota's\n" +
		" periods in which it ran out; reported: the mean utilizations of the load reports in its calls' trailers; heavy run, wait:\n" +
		" the heavy calls' mean slot time and wait for a slot, ms; passes/s: the batch job's or the neighbour's CRC passes)\n")

	if len(r.Results) > 0 && r.Config.Rounds > 1 {
		rounds := report.NewTable("scenario", "policy", "p99 of each round, in order")
		for _, res := range r.Results {
			var ps []string
			for _, p := range res.RoundP99Ms {
				ps = append(ps, num(p))
			}
			rounds.Row(res.Scenario, res.Policy, strings.Join(ps, "  "))
		}
		ew.Printf("\n")
		if err := rounds.Write(ew); err != nil {
			return err
		}
	}

	for _, s := range r.Skipped {
		ew.Printf("\nskipped: %s: %s", s.Scenario, s.Reason)
	}
	if len(r.Skipped) > 0 {
		ew.Printf("\n")
	}
	writeTargets(ew, "targets", r.Targets)
	return ew.Err()
}

// writeTargets writes ts under the heading, a line each; nothing without
// targets.
func writeTargets(ew *report.ErrWriter, heading string, ts []Target) {
	if len(ts) > 0 {
		ew.Printf("\n%s:\n", heading)
	}
	for _, t := range ts {
		verdict := "held"
		if !t.Held {
			verdict = "NOT held"
		}
		ew.Printf("  %s: %s: %s (%s)\n", t.Scenario, t.Target, verdict, t.Detail)
	}
}

// arrivalsText says what the arrival process is.
func arrivalsText(arrivals string) string {
	if arrivals == ArrivalsPoisson {
		return "at Poisson times"
	}
	return "at a fixed interval"
}

// seconds writes a number of seconds briefly: "20 s", "1.5 s".
func seconds(s float64) string { return strconv.FormatFloat(s, 'g', 4, 64) + " s" }

// num writes an optional value with 3 significant digits, "-" for none.
func num(v *float64) string {
	if v == nil {
		return "-"
	}
	return report.Ms(*v)
}

// pct writes an optional percentage, "-" for none.
func pct(v *float64) string {
	if v == nil {
		return "-"
	}
	return report.Pct(*v)
}

// WritePlots writes the p99 of every row and method to p99Path, and every
// replica's share of each row to sharePath.
func (r *Report) WritePlots(p99Path, sharePath string) error {
	if len(r.Results) == 0 {
		return fmt.Errorf("no results to plot")
	}
	var categories []string
	var policies []string
	for _, res := range r.Results {
		if !slices.Contains(policies, res.Policy) {
			policies = append(policies, res.Policy)
		}
		for _, m := range append([]string{"all"}, MethodNames()...) {
			c := res.Scenario + ": " + m
			if !slices.Contains(categories, c) {
				categories = append(categories, c)
			}
		}
	}
	bars := make([]report.Bars, len(policies))
	for i, p := range policies {
		bars[i] = report.Bars{Name: p, Values: nanSlice(len(categories))}
	}
	for _, res := range r.Results {
		b := &bars[slices.Index(policies, res.Policy)]
		b.Values[slices.Index(categories, res.Scenario+": all")] = res.P99Ms
		for _, m := range res.Methods {
			b.Values[slices.Index(categories, res.Scenario+": "+m.Method)] = m.P99Ms
		}
	}
	if err := report.BarPlot(p99Path, "cpusched fleet: p99 by scenario and method", "p99 latency (ms)", true, categories, bars); err != nil {
		return err
	}

	rows := make([]string, len(r.Results))
	shares := make([]report.Bars, r.Config.Replicas)
	for i := range shares {
		name := fmt.Sprintf("replica %d", i)
		if i == 0 {
			name += " (weak / batch)"
		}
		shares[i] = report.Bars{Name: name, Values: nanSlice(len(rows))}
	}
	for j, res := range r.Results {
		rows[j] = res.Scenario + " " + res.Policy
		for _, rep := range res.Replicas {
			if rep.ID < len(shares) {
				shares[rep.ID].Values[j] = 100 * rep.Share
			}
		}
	}
	return report.BarPlot(sharePath, "cpusched fleet: each replica's share of the calls", "share of calls (%)", false, rows, shares)
}

func nanSlice(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

// writeOutputs writes the table (or the JSON, with JSONPath "-") to
// stdout, and the JSON file and OutDir's files as cfg asks.
func writeOutputs(cfg Config, rep *Report) error {
	stdout := cfg.Stdout
	if stdout == nil {
		stdout = io.Discard
	}
	write := rep.WriteTable
	if cfg.JSONPath == "-" {
		write = rep.WriteJSON
	}
	if err := write(stdout); err != nil {
		return err
	}
	if cfg.JSONPath != "" && cfg.JSONPath != "-" {
		if err := rep.writeJSONFile(cfg.JSONPath); err != nil {
			return err
		}
	}
	if cfg.OutDir == "" || len(rep.Results) == 0 {
		return nil
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return err
	}
	jsonPath := filepath.Join(cfg.OutDir, JSONFile)
	if err := rep.writeJSONFile(jsonPath); err != nil {
		return err
	}
	p99, share := filepath.Join(cfg.OutDir, P99Plot), filepath.Join(cfg.OutDir, SharePlot)
	if err := rep.WritePlots(p99, share); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if cfg.JSONPath != "-" {
		fmt.Fprintf(stdout, "\nwrote %s, %s and %s\n", jsonPath, p99, share)
	}
	return nil
}

// writeJSONFile writes the report's JSON to the file path.
func (r *Report) writeJSONFile(path string) error {
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
