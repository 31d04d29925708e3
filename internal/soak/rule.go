package soak

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// The pass rule's constants; Rule's doc comment says how they are used.
const (
	// WarmupFraction is the start of the run whose samples are ignored:
	// heaps, pools and connection counts grow to their working size.
	WarmupFraction = 0.10
	// WindowFraction is the length of the reference window (right after
	// the warm-up) and of the final window (the end of the run).
	WindowFraction = 0.10
	// MinWindowSamples is the fewest samples a window holds: a shorter
	// window is extended with the next (reference) or previous (final)
	// samples.
	MinWindowSamples = 3
	// RSSTolerance is how far RSS may move from its reference, either way.
	RSSTolerance = 0.15
	// GoroutineSlack and FDSlack are the absolute slack of the flatness
	// checks; the slack is this or SlackFraction of the reference window's
	// maximum, whichever is larger.
	GoroutineSlack = 20
	FDSlack        = 10
	SlackFraction  = 0.10
)

// RuleText states the pass rule in words, for the report.
const RuleText = "after a warm-up of the first 10% of the run: " +
	"RSS stays within ±15% of its reference, the median of the reference window (the next 10% of the run, at least 3 samples), at every sample; " +
	"goroutines and fds are flat: the final window's maximum (the last 10%, at least 3 samples) is at most the reference window's maximum plus a slack " +
	"(goroutines max(20, 10%), fds max(10, 10%)), and the medians of the four quarters after the warm-up do not rise at every step by more than half the slack in all; " +
	"every /metrics scrape succeeds"

// Check is the verdict on one quantity.
type Check struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
}

// Rule applies the pass rule to samples of a run of length duration (their
// times T in seconds from the run's start):
//
//   - Warm-up: samples with T < 10% of duration are ignored.
//   - Reference window: samples with T in [10%, 20%) of duration, extended
//     to the first MinWindowSamples after the warm-up if it has fewer.
//     Final window: samples with T >= 90% of duration, extended to the last
//     MinWindowSamples.
//   - RSS: its reference is the median of the reference window; every
//     sample after the warm-up is within ±RSSTolerance (15%) of it.
//   - Goroutines and fds are flat: with slack = max(GoroutineSlack (20) or
//     FDSlack (10), 10% of the reference window's maximum), the final
//     window's maximum is at most the reference window's maximum + slack
//     (maxima, because the number of requests in flight makes both swing
//     from sample to sample), and there is no sustained upward trend: the
//     medians of the four quarters of the post-warm-up samples do not rise
//     at every step by slack/2 or more in all.
//   - Every /metrics scrape succeeded (a failed one has no goroutine count).
//
// It returns one Check per quantity; the run passes if all pass. Fewer than
// 2*MinWindowSamples samples after the warm-up fail every check.
func Rule(samples []Sample, duration time.Duration) []Check {
	d := duration.Seconds()
	var post []Sample
	for _, s := range samples {
		if s.T >= WarmupFraction*d {
			post = append(post, s)
		}
	}
	if len(post) < 2*MinWindowSamples {
		msg := fmt.Sprintf("only %d samples after the warm-up, need at least %d", len(post), 2*MinWindowSamples)
		return []Check{{"rss", false, msg}, {"goroutines", false, msg}, {"fds", false, msg}, {"scrapes", false, msg}}
	}
	refEnd := 0
	for refEnd < len(post) && post[refEnd].T < (WarmupFraction+WindowFraction)*d {
		refEnd++
	}
	refEnd = max(refEnd, MinWindowSamples)
	finalStart := len(post)
	for finalStart > 0 && post[finalStart-1].T >= (1-WindowFraction)*d {
		finalStart--
	}
	finalStart = min(finalStart, len(post)-MinWindowSamples)
	ref, final := post[:refEnd], post[finalStart:]

	var scraped []Sample
	failed := 0
	for _, s := range post {
		if s.ScrapeError != "" {
			failed++
			continue
		}
		scraped = append(scraped, s)
	}
	checks := []Check{rssCheck(post, ref)}
	checks = append(checks,
		flatCheck("goroutines", GoroutineSlack, scraped, okOnly(ref), okOnly(final), func(s Sample) float64 { return float64(s.Goroutines) }),
		flatCheck("fds", FDSlack, post, ref, final, func(s Sample) float64 { return float64(s.FDs) }),
	)
	scrapes := Check{Name: "scrapes", Pass: failed == 0, Detail: fmt.Sprintf("%d of %d /metrics scrapes after the warm-up failed", failed, len(post))}
	for _, s := range post {
		if s.ScrapeError != "" {
			scrapes.Detail += fmt.Sprintf("; first at %s s: %s", fmtT(s.T), s.ScrapeError)
			break
		}
	}
	return append(checks, scrapes)
}

// okOnly drops the samples whose scrape failed.
func okOnly(samples []Sample) []Sample {
	return slices.DeleteFunc(slices.Clone(samples), func(s Sample) bool { return s.ScrapeError != "" })
}

func rssCheck(post, ref []Sample) Check {
	mb := func(s Sample) float64 { return float64(s.RSSBytes) / (1 << 20) }
	refMB := median(values(ref, mb))
	lo, hi := math.Inf(1), math.Inf(-1)
	var loT, hiT float64
	for _, s := range post {
		if v := mb(s); v < lo {
			lo, loT = v, s.T
		}
		if v := mb(s); v > hi {
			hi, hiT = v, s.T
		}
	}
	loPct, hiPct := 100*(lo/refMB-1), 100*(hi/refMB-1)
	pass := refMB > 0 && lo >= (1-RSSTolerance)*refMB && hi <= (1+RSSTolerance)*refMB
	return Check{Name: "rss", Pass: pass, Detail: fmt.Sprintf(
		"reference %.1f MB (median of %s..%s s); after the warm-up %.1f MB (%+.1f%%, at %s s) to %.1f MB (%+.1f%%, at %s s); limit ±%.0f%%",
		refMB, fmtT(ref[0].T), fmtT(ref[len(ref)-1].T), lo, loPct, fmtT(loT), hi, hiPct, fmtT(hiT), 100*RSSTolerance)}
}

// flatCheck applies the flatness rule to one quantity: post holds the
// samples after the warm-up that have it, ref and final the windows.
func flatCheck(name string, absSlack float64, post, ref, final []Sample, value func(Sample) float64) Check {
	if len(ref) == 0 || len(final) == 0 || len(post) < 4 {
		return Check{Name: name, Pass: false, Detail: "too few samples with a value"}
	}
	refMax, finalMax := slices.Max(values(ref, value)), slices.Max(values(final, value))
	slack := math.Max(absSlack, math.Round(SlackFraction*refMax))
	var q [4]float64
	for i := range q {
		q[i] = median(values(post[i*len(post)/4:(i+1)*len(post)/4], value))
	}
	rising := q[0] < q[1] && q[1] < q[2] && q[2] < q[3] && q[3]-q[0] >= slack/2
	grew := finalMax > refMax+slack
	detail := fmt.Sprintf("max of the last 10%% %.0f vs %.0f after the warm-up (limit %.0f); quarter medians %.0f %.0f %.0f %.0f",
		finalMax, refMax, refMax+slack, q[0], q[1], q[2], q[3])
	switch {
	case grew && rising:
		detail += ": grew, and rose steadily"
	case grew:
		detail += ": grew"
	case rising:
		detail += fmt.Sprintf(": rose steadily, by %.0f in all (limit %.0f)", q[3]-q[0], slack/2)
	}
	return Check{Name: name, Pass: !grew && !rising, Detail: detail}
}

// fmtT writes a sample's time in seconds to a tenth, without trailing
// zeros: "12", "1.5".
func fmtT(t float64) string { return strconv.FormatFloat(math.Round(10*t)/10, 'f', -1, 64) }

func values(samples []Sample, value func(Sample) float64) []float64 {
	out := make([]float64, len(samples))
	for i, s := range samples {
		out[i] = value(s)
	}
	return out
}

// median returns the median of vs (the mean of the middle two for an even
// count), NaN for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(vs))
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
