package soak

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// series builds the samples of a 60 s run, one a second at T = 1..60, from
// functions of the second.
func series(rss func(t int) float64, goroutines, fds func(t int) int) []Sample {
	var out []Sample
	for t := 1; t <= 60; t++ {
		out = append(out, Sample{
			T: float64(t), RSSBytes: uint64(rss(t) * (1 << 20)),
			Goroutines: goroutines(t), FDs: fds(t), Threads: 12,
		})
	}
	return out
}

// noise returns a deterministic pseudo-random function of the second in
// lo..hi.
func noise(seed uint64, lo, hi int) func(int) int {
	vals := make([]int, 61)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range vals {
		vals[i] = lo + r.IntN(hi-lo+1)
	}
	return func(t int) int { return vals[t] }
}

// spiky returns a deterministic pseudo-random function of the second in
// lo..hi, except for one second in four in spikeLo..spikeHi.
func spiky(seed uint64, lo, hi, spikeLo, spikeHi int) func(int) int {
	base, spike := noise(seed, lo, hi), noise(seed+100, spikeLo, spikeHi)
	return func(t int) int {
		if t%4 == 0 {
			return spike(t)
		}
		return base(t)
	}
}

func constant(v int) func(int) int { return func(int) int { return v } }

// checkResults compares Rule's verdicts with want (name -> pass) and that
// each detail contains the wanted text.
func checkResults(t *testing.T, checks []Check, want map[string]bool, wantDetail map[string]string) {
	t.Helper()
	got := map[string]Check{}
	for _, c := range checks {
		got[c.Name] = c
	}
	for name, pass := range want {
		c, ok := got[name]
		if !ok {
			t.Errorf("check %s: missing; got %+v", name, checks)
			continue
		}
		if c.Pass != pass {
			t.Errorf("check %s: got pass=%v (%s), want pass=%v", name, c.Pass, c.Detail, pass)
		}
		if w := wantDetail[name]; w != "" && !strings.Contains(c.Detail, w) {
			t.Errorf("check %s: got detail %q, want it to contain %q", name, c.Detail, w)
		}
	}
}

func TestRule(t *testing.T) {
	const d = 60 * time.Second
	flatRSS := func(t int) float64 { return 40 + float64(t%5)*0.4 } // 40.0..41.6 MB
	tests := []struct {
		name       string
		samples    []Sample
		want       map[string]bool
		wantDetail map[string]string
	}{{
		name:    "flat",
		samples: series(flatRSS, noise(1, 14, 24), noise(2, 12, 15)),
		want:    map[string]bool{"rss": true, "goroutines": true, "fds": true, "scrapes": true},
		// Reference: the median of T=6..11, 40.0 40.4 40.8 41.2 41.6 40.0.
		wantDetail: map[string]string{"rss": "reference 40.6 MB (median of 6..11 s)"},
	}, {
		name: "noisy but flat: requests in flight make goroutines and fds spike in one sample of four, RSS bulges 20% in the warm-up",
		samples: series(func(t int) float64 {
			if t < 6 {
				return 48 // ignored: warm-up
			}
			return flatRSS(t)
		}, spiky(3, 14, 18, 30, 60), spiky(4, 12, 14, 20, 35)),
		want: map[string]bool{"rss": true, "goroutines": true, "fds": true},
	}, {
		name: "a burst of RSS to +30% for 2 of the 6 samples of a window passes: the window's median stays",
		samples: series(func(t int) float64 {
			if t == 30 || t == 31 {
				return 40.6 * 1.3
			}
			return 40.6
		}, constant(20), constant(12)),
		want:       map[string]bool{"rss": true},
		wantDetail: map[string]string{"rss": "highest sample 52.8 MB at 30 s"},
	}, {
		name: "RSS within 15%: +14% at the end",
		samples: series(func(t int) float64 {
			if t > 50 {
				return 40.6 * 1.14
			}
			return 40.6
		}, constant(20), constant(12)),
		want: map[string]bool{"rss": true},
	}, {
		name:    "leaking RSS: +0.5 MB a second from 40 MB ends at +108%",
		samples: series(func(t int) float64 { return 40 + 0.5*float64(t) }, constant(20), constant(12)),
		want:    map[string]bool{"rss": false, "goroutines": true, "fds": true},
		// Reference: the median of 43..45.5 MB at T=6..11 is 44.25; the last
		// window's, 68.5 MB at T=57, is +54.8%.
		wantDetail: map[string]string{"rss": "to 68.5 MB (+54.8%, 54..60 s), limit ±15%"},
	}, {
		name: "RSS shrinking by 20% fails too",
		samples: series(func(t int) float64 {
			if t > 30 {
				return 32
			}
			return 40
		}, constant(20), constant(12)),
		want: map[string]bool{"rss": false},
	}, {
		name:       "leaking goroutines: one a second",
		samples:    series(flatRSS, func(t int) int { return 10 + t }, constant(12)),
		want:       map[string]bool{"rss": true, "goroutines": false, "fds": true},
		wantDetail: map[string]string{"goroutines": "median 67 in the last window (54..60 s) vs 18.5 in the reference (limit 28.5)"},
	}, {
		name:    "leaking fds: one every 5 s",
		samples: series(flatRSS, constant(20), func(t int) int { return 12 + t/5 }),
		// The reference's median is 13 (T=6..11), the last window's 23.
		want:       map[string]bool{"fds": false, "goroutines": true},
		wantDetail: map[string]string{"fds": "median 23 in the last window (54..60 s) vs 13 in the reference (limit 21)"},
	}, {
		name:    "leaking fds slowly: one every 10 s, within the slack at the end but rising all along",
		samples: series(flatRSS, constant(20), func(t int) int { return 12 + t/10 }),
		// The medians: 12 in the reference, 17 at the end (limit 20); the
		// quarters climb 13, 14, 15, 17.
		want:       map[string]bool{"fds": false},
		wantDetail: map[string]string{"fds": "rose steadily, by 4 in all (limit 4)"},
	}, {
		name: "a failed scrape",
		samples: func() []Sample {
			s := series(flatRSS, constant(20), constant(12))
			s[30].Goroutines, s[30].ScrapeError = -1, "context deadline exceeded"
			return s
		}(),
		want:       map[string]bool{"scrapes": false, "goroutines": true},
		wantDetail: map[string]string{"scrapes": "1 of 55 /metrics scrapes after the warm-up failed; first at 31 s"},
	}, {
		name:       "too few samples",
		samples:    series(flatRSS, constant(20), constant(12))[:10],
		want:       map[string]bool{"rss": false, "goroutines": false, "fds": false, "scrapes": false},
		wantDetail: map[string]string{"rss": "only 5 samples after the warm-up, need at least 6"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkResults(t, Rule(tt.samples, d), tt.want, tt.wantDetail)
		})
	}
}

// TestRuleShortRun: a run so short that its windows hold under
// MinWindowSamples samples still compares three against three.
func TestRuleShortRun(t *testing.T) {
	var samples []Sample
	for i := range 20 { // 10 s at 0.5 s: reference window 1..1.5 s
		samples = append(samples, Sample{T: 0.5 * float64(i+1), RSSBytes: 30 << 20, Goroutines: 15 + i%3, FDs: 12})
	}
	checks := Rule(samples, 10*time.Second)
	checkResults(t, checks, map[string]bool{"rss": true, "goroutines": true, "fds": true},
		map[string]string{"rss": "median of 1..2 s", "goroutines": "median 16 in the last window (9..10 s) vs 16 in the reference"})
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7}} {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v): got %v, want %v", tt.in, got, tt.want)
		}
	}
}
