package demo

import (
	"fmt"
	"github.com/cpusched/cpusched/internal/israce"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetrics checks that GET /metrics serves the scheduler's, the Go
// runtime's and the process's metrics, and that a scheduled /checksum
// request shows in the scheduler's counters.
func TestMetrics(t *testing.T) {
	_, hs := newTestServer(t, Config{Workers: 1})

	before := scrape(t, hs.URL)
	if code, _, body := get(t, "GET", hs.URL+"/checksum?sched=1&n=3&group=tenant"); code != 200 {
		t.Fatalf("GET /checksum?sched=1: got %d %q, want 200", code, body)
	}
	after := scrape(t, hs.URL)

	for _, name := range []string{"cpusched_workers", "go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := after[name]; !ok {
			t.Errorf("/metrics: no %s", name)
		}
	}
	tests := []struct {
		name       string
		labels     string
		wantChange float64
	}{
		{"cpusched_tasks_submitted_total", "", 1},
		{"cpusched_tasks_ended_total", `outcome="completed"`, 1},
		{"cpusched_class_tasks_submitted_total", `class="normal"`, 1},
		// tenant is not tracked (the demo sets no group weight): it is
		// counted with the other such groups.
		{"cpusched_group_tasks_ended_total", `group="(other)"`, 1},
		{"cpusched_group_weight", `group="(other)"`, 100}, // a new series
		{"cpusched_tasks_rejected_total", "", 0},
		{"cpusched_workers", "", 0},
	}
	for _, tc := range tests {
		got := sample(after, tc.name, tc.labels) - sample(before, tc.name, tc.labels)
		if got != tc.wantChange {
			t.Errorf("%s{%s}: changed by %v, want %v", tc.name, tc.labels, got, tc.wantChange)
		}
	}
	if got := sample(after, "cpusched_workers", ""); got != 1 {
		t.Errorf("cpusched_workers: got %v, want 1", got)
	}
}

// scrape returns GET /metrics parsed into metric families by name.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	code, h, body := get(t, "GET", url+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: got %d, want 200", code)
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET /metrics Content-Type: got %q, want text/plain", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("GET /metrics: parsing the body: %v", err)
	}
	return families
}

// sample returns the value of the counter or gauge name whose labels are
// labels (name="value", or "" for none), or 0 if there is none.
func sample(families map[string]*dto.MetricFamily, name, labels string) float64 {
	for _, m := range families[name].GetMetric() {
		var pairs []string
		for _, l := range m.GetLabel() {
			pairs = append(pairs, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		if strings.Join(pairs, ",") != labels {
			continue
		}
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return 0
}

// TestMetricsBoundedByGroupNames pins a leak: every distinct ?group= value
// was kept forever by the scheduler and exported as its own series (40,000
// names made /metrics 142 MB). After 100,000 distinct names (10,000 under
// -race or -short) /metrics must stay under 200 KB.
func TestMetricsBoundedByGroupNames(t *testing.T) {
	n := 100_000
	if testing.Short() || israce.Enabled {
		n = 10_000
	}
	s, hs := newTestServer(t, Config{Workers: 1})
	h := s.Handler()
	for i := range n {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", fmt.Sprintf("/checksum?sched=1&n=1&group=user-%d", i), nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("request %d: got %d %q, want 200", i, rec.Code, rec.Body)
		}
	}
	_, _, body := get(t, "GET", hs.URL+"/metrics")
	t.Logf("/metrics after %d group names: %d bytes", n, len(body))
	if len(body) > 200<<10 {
		t.Errorf("/metrics after %d group names is %d bytes, want at most 200 KB", n, len(body))
	}
}
