package soak

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/demo"
)

func TestCycle(t *testing.T) {
	cases := mixCases(4)
	order := cycle(cases)
	seen := make([]int, len(cases))
	for _, ci := range order {
		seen[ci]++
	}
	for i, c := range cases {
		if seen[i] != c.weight {
			t.Errorf("case %q: %d times in a cycle, want its weight %d", c.name, seen[i], c.weight)
		}
	}
	// The four /delay1ms of a cycle are spread, not in a row.
	for i := 1; i < len(order); i++ {
		if order[i] == 0 && order[i-1] == 0 {
			t.Errorf("cycle sends case 0 twice in a row at %d: %v", i, order)
		}
	}
}

// drive runs the mix (and the distinct-group case) against base for d and
// returns the driver's tally.
func drive(t *testing.T, base string, d time.Duration) ([]CaseCount, int64, []Unexpected) {
	t.Helper()
	mix := mixCases(3)
	cases := append(mix, distinctGroupCase("test"))
	drv := newDriver(base, cases, 20)
	defer drv.close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { drv.run(ctx, stream{order: cycle(mix), rate: 400, conc: 16, seed: 1}, start) })
	wg.Go(func() { drv.run(ctx, stream{order: []int{len(mix)}, rate: 20, conc: 4, seed: 2}, start) })
	wg.Wait()
	return drv.tally()
}

// TestMixAgainstDemoServer: the demo server answers every case of the mix
// as the mix expects, and every case is sent within a second.
func TestMixAgainstDemoServer(t *testing.T) {
	s, err := demo.NewServer(demo.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer func() {
		hs.Close()
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("closing the demo server: %v", err)
		}
	}()
	counts, unexpected, examples := drive(t, hs.URL, 1500*time.Millisecond)
	if unexpected != 0 {
		t.Errorf("got %d unexpected outcomes, want 0; the first: %+v", unexpected, examples)
	}
	for _, c := range counts {
		var n int64
		for _, v := range c.Counts {
			n += v
		}
		if n == 0 {
			t.Errorf("case %q: no request finished, want some", c.Case)
		}
		if strings.HasPrefix(c.Case, "cancelled") && c.Counts[OutcomeCancelled] == 0 {
			t.Errorf("case %q: got %v, want requests cancelled", c.Case, c.Counts)
		}
	}
}

// TestMixFlagsWrongAnswers: a server that answers 200 to everything (and
// 500 to /stats) fails the bad-parameter cases and /stats.
func TestMixFlagsWrongAnswers(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stats" && r.Method == http.MethodGet {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer hs.Close()
	counts, unexpected, examples := drive(t, hs.URL, 500*time.Millisecond)
	if unexpected == 0 || len(examples) == 0 {
		t.Fatalf("got %d unexpected outcomes, want the bad parameters' and /stats's", unexpected)
	}
	byCase := map[string]map[string]int64{}
	for _, c := range counts {
		byCase[c.Case] = c.Counts
	}
	for _, name := range []string{"bad n=0", "bad nice=99", "unknown path", "POST /checksum"} {
		if byCase[name]["200"] == 0 {
			t.Errorf("case %q: got %v, want 200s counted", name, byCase[name])
		}
	}
	if byCase["GET /stats"]["500"] == 0 {
		t.Errorf("GET /stats: got %v, want 500s counted", byCase["GET /stats"])
	}
	var sawStats bool
	for _, e := range examples {
		if e.Case == "GET /stats" && e.Outcome == "500" && strings.Contains(e.Detail, "boom") {
			sawStats = true
		}
	}
	if !sawStats && len(examples) < maxExamples {
		t.Errorf("examples %+v: want the /stats 500 with its body", examples)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP cpusched_group_weight the group's weight
# TYPE cpusched_group_weight gauge
cpusched_group_weight 100
cpusched_group_weight{group="(other)"} 100
cpusched_group_weight_extra 1
# HELP go_goroutines Number of goroutines that currently exist.
go_goroutines 17
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	// cpusched_group_weight_extra is another metric but shares the prefix:
	// the count is of lines, an upper bound that only the leak test reads.
	if m.goroutines != 17 || m.groups != 3 || m.bytes != len(text) {
		t.Errorf("got %+v, want goroutines 17, groups 3, bytes %d", m, len(text))
	}
	if _, err := parseMetrics(strings.NewReader("up 1\n")); err == nil {
		t.Errorf("no go_goroutines: got nil error, want one")
	}
}

func TestQueueBurst(t *testing.T) {
	for _, tt := range []struct {
		banner string
		conc   int
		want   int
	}{
		{"isolation=ospriority workers=2 gomaxprocs=3", 16, 4},
		{"isolation=none workers=64 gomaxprocs=64", 16, 8},
		{"no workers here", 16, 4},
		{"isolation=reserve workers=1 gomaxprocs=2", 1, 1},
	} {
		if got := queueBurst(tt.banner, tt.conc); got != tt.want {
			t.Errorf("queueBurst(%q, %d): got %d, want %d", tt.banner, tt.conc, got, tt.want)
		}
	}
}

func TestCheckLoopback(t *testing.T) {
	for _, tt := range []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:8080", true},
		{"http://[::1]:8080", true},
		{"http://10.0.0.1:8080", false},
		{"http://example.com", false},
	} {
		if err := checkLoopback(tt.url); (err == nil) != tt.ok {
			t.Errorf("checkLoopback(%q): got %v, want ok=%v", tt.url, err, tt.ok)
		}
	}
}
