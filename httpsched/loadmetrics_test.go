package httpsched

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/loadreport"
	"github.com/cpusched/cpusched/internal/schedtest"
)

// decimal is the value syntax the tests accept: plain or scientific
// decimal notation, a subset of what Envoy's absl::SimpleAtod parses, so
// that a value accepted here is accepted there.
var decimal = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// parseEnvoyText parses an endpoint-load-metrics value as Envoy's ORCA
// parser does (loadmetrics.go gives the version and the grammar): the
// report's fields by name, named metrics as "named_metrics.<key>", or the
// error for which Envoy drops the report.
func parseEnvoyText(value string) (map[string]float64, error) {
	list, ok := strings.CutPrefix(value, "TEXT ")
	if !ok {
		return nil, errors.New("unsupported ORCA header format")
	}
	report := map[string]float64{}
	for _, item := range strings.Split(list, ",") { // parseCommaDelimitedHeader
		item = strings.Trim(item, " \t\r\n\v\f")
		if item == "" {
			continue
		}
		// StrSplit(item, MaxSplits('=', 1), SkipWhitespace()): the pieces
		// are not trimmed, and a whitespace-only piece is dropped.
		var pieces []string
		for _, p := range strings.SplitN(item, "=", 2) {
			if strings.Trim(p, " \t\r\n\v\f") != "" {
				pieces = append(pieces, p)
			}
		}
		name, val := "", ""
		if len(pieces) > 0 {
			name = pieces[0]
		}
		if len(pieces) > 1 {
			val = pieces[1]
		}
		if _, dup := report[name]; dup {
			return nil, fmt.Errorf("endpoint-load-metrics contains duplicate metric: %s", name)
		}
		switch {
		case name == "":
			return nil, errors.New("metric names cannot be empty strings")
		case val == "":
			return nil, errors.New("metric values cannot be empty strings")
		case !decimal.MatchString(val):
			return nil, fmt.Errorf("unable to parse custom backend load metric value(%s): %s", name, val)
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("custom backend load metric value(%s) cannot be NaN or infinity", name)
		}
		switch key, named := strings.CutPrefix(name, "named_metrics."); {
		case named && key == "":
			return nil, errors.New("named metric key is empty.")
		case named:
		case name == "cpu_utilization", name == "mem_utilization", name == "application_utilization", name == "eps", name == "rps_fractional":
		default:
			return nil, fmt.Errorf("unsupported metric name: %s", name)
		}
		report[name] = v
	}
	return report, nil
}

func TestParseEnvoyText(t *testing.T) {
	// The parser of the tests against the cases of Envoy's own parser
	// tests (test/common/orca/orca_parser_test.cc), with '='.
	good := "TEXT cpu_utilization=0.7,application_utilization=0.8,mem_utilization=0.9," +
		"rps_fractional=1000,eps=2,named_metrics.foo=123,named_metrics.bar=0.2"
	got, err := parseEnvoyText(good)
	want := map[string]float64{"cpu_utilization": 0.7, "application_utilization": 0.8, "mem_utilization": 0.9,
		"rps_fractional": 1000, "eps": 2, "named_metrics.foo": 123, "named_metrics.bar": 0.2}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("parseEnvoyText(%q) = %v, %v; want %v", good, got, err, want)
	}
	for _, bad := range []string{
		"BAD random-value",
		"",
		`TEXT cpu_utilization="0.7"`,
		"TEXT cpu_utilization=NaN",
		"TEXT cpu_utilization=inf",
		"TEXT cpu_utilization=0.7,cpu_utilization=0.8",
		"TEXT cpu_utilization=0.7,unsupported_metric=0.8",
		"TEXT named_metrics.foo=123,named_metrics.duplicate=123,named_metrics.duplicate=0.2",
		"TEXT named_metrics.=123",
		"TEXT not-a-list-of-key-value-pairs",
		"TEXT cpu_utilization:0.7", // the delimiter before envoyproxy/envoy#37724
		"TEXT cpu_utilization = 0.7",
	} {
		if got, err := parseEnvoyText(bad); err == nil {
			t.Errorf("parseEnvoyText(%q) = %v, want an error", bad, got)
		}
	}
}

// checkLoadMetrics parses the header value v and checks that it carries
// each of r's values that Envoy accepts (finite, >= 0) exactly, and
// nothing else.
func checkLoadMetrics(t *testing.T, v string, r loadreport.Report) map[string]float64 {
	t.Helper()
	got, err := parseEnvoyText(v)
	if err != nil {
		t.Fatalf("header %q: Envoy's grammar refuses it: %v", v, err)
	}
	want := map[string]float64{}
	for name, val := range map[string]float64{
		"application_utilization": r.Application,
		"cpu_utilization":         r.CPU,
		"rps_fractional":          r.QPS,
		"eps":                     r.EPS,
		"named_metrics." + loadreport.QueueWaitP99Metric: loadreport.Millis(r.QueueWaitP99),
	} {
		if val >= 0 && !math.IsInf(val, 1) {
			want[name] = math.Abs(val) // -0 is written 0
		}
	}
	if len(got) != len(want) {
		t.Fatalf("header %q: got metrics %v, want %v", v, got, want)
	}
	for name, val := range want {
		if g, ok := got[name]; !ok || g != val || math.Signbit(g) {
			t.Fatalf("header %q: got %s=%v (present %v), want %v", v, name, g, ok, val)
		}
	}
	return got
}

func TestFormatLoadMetrics(t *testing.T) {
	for _, tt := range []struct {
		r    loadreport.Report
		want string
	}{
		{loadreport.Report{Application: 0.42, CPU: 0.375, QPS: 120.5, EPS: 0, QueueWaitP99: 3200 * time.Microsecond},
			"TEXT application_utilization=0.42, cpu_utilization=0.375, rps_fractional=120.5, eps=0, named_metrics.cpusched_queue_wait_p99_ms=3.2"},
		{loadreport.Report{Application: 1e-7, CPU: -1, QPS: 3e9},
			"TEXT application_utilization=0.0000001, rps_fractional=3000000000, eps=0, named_metrics.cpusched_queue_wait_p99_ms=0"},
		{loadreport.Report{Application: math.NaN(), CPU: math.Inf(1), QPS: -2, EPS: math.Inf(-1), QueueWaitP99: -1},
			"TEXT "},
	} {
		got := formatLoadMetrics(tt.r)
		if got != tt.want {
			t.Errorf("formatLoadMetrics(%+v) = %q, want %q", tt.r, got, tt.want)
		}
		checkLoadMetrics(t, got, tt.r)
	}
}

// FuzzLoadMetricsHeader formats reports of any values: the header must
// always parse under Envoy's grammar (parseEnvoyText), carry every value
// Envoy accepts exactly (what strconv parses back) and leave the others
// out, and be a valid HTTP field value.
func FuzzLoadMetricsHeader(f *testing.F) {
	f.Add(0.42, 0.375, 120.5, 0.0, int64(3200*time.Microsecond))
	f.Add(0.0, -1.0, 0.0, 0.0, int64(0))
	f.Add(math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), int64(-1))
	f.Add(5e-324, math.MaxFloat64, 1e21, 1e-21, int64(math.MaxInt64))
	f.Add(123456789.123456789, 0.1, 0.2, 0.30000000000000004, int64(1))
	f.Fuzz(func(t *testing.T, app, cpu, qps, eps float64, p99 int64) {
		r := loadreport.Report{Application: app, CPU: cpu, QPS: qps, EPS: eps, QueueWaitP99: time.Duration(p99)}
		v := formatLoadMetrics(r)
		checkLoadMetrics(t, v, r)
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < ' ' || c > '~' {
				t.Fatalf("header %q: byte %q at %d is not a visible ASCII character or a space", v, c, i)
			}
		}
	})
}

func TestLoadMetricsHeader(t *testing.T) {
	// Over a real connection: with WithLoadMetricsHeader every response
	// carries the header, in Envoy's grammar, with the report of the
	// scheduler's load; without it, none.
	s := schedtest.NewScheduler(t, cpusched.WithQueueLimit(1))
	logger, _ := logBuffer()
	mux := http.NewServeMux()
	opts := []Option{WithLoadMetricsHeader(), WithLogger(logger)}
	mux.Handle("/write", Handler(s, new(ok), opts...))
	mux.Handle("/empty", Handler(s, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), opts...))
	mux.Handle("/panic", Handler(s, panicAt("boom", ""), opts...))
	mux.Handle("/plain", Handler(s, new(ok)))
	hs := httptest.NewServer(mux)
	defer hs.Close()
	defer hs.Client().CloseIdleConnections()
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := hs.Client().Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, tt := range []struct {
		path string
		code int
	}{{"/write", 200}, {"/empty", 200}, {"/panic", 500}} {
		resp := get(tt.path)
		if resp.StatusCode != tt.code {
			t.Errorf("%s: got %d, want %d", tt.path, resp.StatusCode, tt.code)
		}
		v := resp.Header.Get("endpoint-load-metrics")
		m, err := parseEnvoyText(v)
		if err != nil {
			t.Errorf("%s: header %q: %v", tt.path, v, err)
			continue
		}
		if m["application_utilization"] <= 0 || m["rps_fractional"] <= 0 {
			t.Errorf("%s: header %q: want application_utilization and rps_fractional above 0 once requests are served", tt.path, v)
		}
	}
	if v := get("/plain").Header.Get("endpoint-load-metrics"); v != "" {
		t.Errorf("without WithLoadMetricsHeader: got the header %q, want none", v)
	}

	// A shed request: 503 with the header, whose eps counts it.
	schedtest.HoldSlot(t, s)
	if _, err := s.Go(t.Context(), func(*cpusched.Task) error { return nil }); err != nil {
		t.Fatal(err) // fills the queue of 1
	}
	resp := get("/write")
	m, err := parseEnvoyText(resp.Header.Get("endpoint-load-metrics"))
	if resp.StatusCode != http.StatusServiceUnavailable || err != nil || m["eps"] <= 0 {
		t.Errorf("with the queue full: got %d, header %q (%v); want 503 with eps above 0", resp.StatusCode, resp.Header.Get("endpoint-load-metrics"), err)
	}
}
