package soak

import (
	"cmp"
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
	// Windows is the number of equal windows the run is cut into for the
	// rule; the first is the warm-up, the second the reference, the last
	// the final window.
	Windows = 10
	// MinWindowSamples is the fewest samples the reference and final
	// windows hold: a shorter one is extended with the next (reference) or
	// previous (final) samples.
	MinWindowSamples = 3
	// RSSTolerance is how far a window's median RSS may be from the
	// reference, either way.
	RSSTolerance = 0.15
	// GoroutineSlack and FDSlack are the absolute slack of the flatness
	// checks; the slack is this or SlackFraction of the reference
	// window's median, whichever is larger.
	GoroutineSlack = 10
	FDSlack        = 8
	SlackFraction  = 0.10
)

// RuleText states the pass rule in words, for the report.
const RuleText = "the run is cut into 10 equal windows; the first is a warm-up and is ignored. " +
	"RSS: the median of every later window is within ±15% of the reference, the median of the second window (the first after the warm-up, at least 3 samples). " +
	"Goroutines and fds are flat: the median of the last window (at least 3 samples) is at most the reference window's median plus a slack " +
	"(goroutines max(10, 10%), fds max(8, 10%)), and the medians of the four quarters after the warm-up do not rise at every step, by half the slack or more in all. " +
	"Every /metrics scrape succeeds, every request gets an expected outcome, and the server exits cleanly on SIGTERM"

// Check is the verdict on one quantity.
type Check struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
}

// Rule applies the pass rule to samples of a run of length duration (their
// times T in seconds from the run's start). The run is cut into Windows
// (10) windows of equal length:
//
//   - Warm-up: the first window's samples (T < 10% of duration) are
//     ignored.
//   - Reference: the second window, extended to the first
//     MinWindowSamples (3) samples after the warm-up if it has fewer.
//     Final: the last window, extended to the last 3 samples.
//   - RSS: its reference is the reference window's median; the median of
//     every later window (each 10% of the run) is within ±RSSTolerance
//     (15%) of it. Medians, not single samples: a leak raises them all
//     from some window on, while a burst of requests in flight (a stall
//     of the machine piles them up) raises a few samples.
//   - Goroutines and fds are flat: with slack = max(GoroutineSlack (10) or
//     FDSlack (8), 10% of the reference median), the final window's median
//     is at most the reference median + slack, and there is no sustained
//     upward trend: the medians of the four quarters of the post-warm-up
//     samples do not rise at every step by slack/2 or more in all. Medians
//     again, as the number of requests in flight makes both swing from
//     sample to sample (goroutines 14..58 in one healthy run).
//   - Every /metrics scrape succeeded (a failed one has no goroutine count).
//
// It returns one Check per quantity, with the figures it compared; the run
// passes if all pass. Fewer than 2*MinWindowSamples samples after the
// warm-up fail every check.
func Rule(samples []Sample, duration time.Duration) []Check {
	d := duration.Seconds()
	window := func(s Sample) int { return min(Windows-1, int(s.T*Windows/d)) }
	var post []Sample
	for _, s := range samples {
		if window(s) > 0 {
			post = append(post, s)
		}
	}
	if len(post) < 2*MinWindowSamples {
		msg := fmt.Sprintf("only %d samples after the warm-up, need at least %d", len(post), 2*MinWindowSamples)
		return []Check{{"rss", false, msg}, {"goroutines", false, msg}, {"fds", false, msg}, {"scrapes", false, msg}}
	}
	refEnd := 0
	for refEnd < len(post) && window(post[refEnd]) == 1 {
		refEnd++
	}
	refEnd = max(refEnd, MinWindowSamples)
	finalStart := len(post)
	for finalStart > 0 && window(post[finalStart-1]) == Windows-1 {
		finalStart--
	}
	finalStart = min(finalStart, len(post)-MinWindowSamples)
	ref, final := post[:refEnd], post[finalStart:]
	// The later windows of the RSS rule: 3..Windows, each as it is.
	var later [][]Sample
	for _, s := range post[refEnd:] {
		if n := len(later); n == 0 || window(later[n-1][0]) != window(s) {
			later = append(later, nil)
		}
		later[len(later)-1] = append(later[len(later)-1], s)
	}

	var scraped []Sample
	failed := 0
	for _, s := range post {
		if s.ScrapeError != "" {
			failed++
			continue
		}
		scraped = append(scraped, s)
	}
	checks := []Check{rssCheck(post, ref, later)}
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

// rssCheck compares the median RSS of each later window with the
// reference window's.
func rssCheck(post, ref []Sample, later [][]Sample) Check {
	mb := func(s Sample) float64 { return float64(s.RSSBytes) / (1 << 20) }
	refMB := median(values(ref, mb))
	pass := refMB > 0
	lo, hi := refMB, refMB
	loAt, hiAt := span(ref), span(ref)
	for _, w := range later {
		m := median(values(w, mb))
		if m < lo {
			lo, loAt = m, span(w)
		}
		if m > hi {
			hi, hiAt = m, span(w)
		}
		pass = pass && m >= (1-RSSTolerance)*refMB && m <= (1+RSSTolerance)*refMB
	}
	peak := slices.MaxFunc(post, func(a, b Sample) int { return cmp.Compare(a.RSSBytes, b.RSSBytes) })
	return Check{Name: "rss", Pass: pass, Detail: fmt.Sprintf(
		"reference %.1f MB (median of %s s); window medians %.1f MB (%+.1f%%, %s s) to %.1f MB (%+.1f%%, %s s), limit ±%.0f%%; highest sample %.1f MB at %s s",
		refMB, span(ref), lo, 100*(lo/refMB-1), loAt, hi, 100*(hi/refMB-1), hiAt, 100*RSSTolerance, mb(peak), fmtT(peak.T))}
}

// span writes the time range of samples: "60..119".
func span(samples []Sample) string {
	return fmtT(samples[0].T) + ".." + fmtT(samples[len(samples)-1].T)
}

// flatCheck applies the flatness rule to one quantity: post holds the
// samples after the warm-up that have it, ref and final the windows.
func flatCheck(name string, absSlack float64, post, ref, final []Sample, value func(Sample) float64) Check {
	if len(ref) == 0 || len(final) == 0 || len(post) < 4 {
		return Check{Name: name, Pass: false, Detail: "too few samples with a value"}
	}
	refMed, finalMed := median(values(ref, value)), median(values(final, value))
	slack := math.Max(absSlack, math.Round(SlackFraction*refMed))
	var q [4]float64
	for i := range q {
		q[i] = median(values(post[i*len(post)/4:(i+1)*len(post)/4], value))
	}
	rising := q[0] < q[1] && q[1] < q[2] && q[2] < q[3] && q[3]-q[0] >= slack/2
	grew := finalMed > refMed+slack
	detail := fmt.Sprintf("median %s in the last window (%s s) vs %s in the reference (limit %s); quarter medians %s %s %s %s; max %s vs %s",
		num(finalMed), span(final), num(refMed), num(refMed+slack), num(q[0]), num(q[1]), num(q[2]), num(q[3]),
		num(slices.Max(values(final, value))), num(slices.Max(values(ref, value))))
	switch {
	case grew && rising:
		detail += ": grew, and rose steadily"
	case grew:
		detail += ": grew"
	case rising:
		detail += fmt.Sprintf(": rose steadily, by %s in all (limit %s)", num(q[3]-q[0]), num(slack/2))
	}
	return Check{Name: name, Pass: !grew && !rising, Detail: detail}
}

// num writes a count or a median of counts: "15", "15.5".
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

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
