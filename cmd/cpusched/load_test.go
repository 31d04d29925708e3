package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

// verifyNoLeaks checks, after the test and its cleanups, that it left no
// goroutines behind. (A per-test check, not VerifyTestMain, so that it does
// not clash with the TestMain of other commands' tests in this package.)
func verifyNoLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

func newLoadServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLoadUsageErrors(t *testing.T) {
	verifyNoLeaks(t)
	srv := newLoadServer(t)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no URL", []string{"-n", "1"}, "exactly one URL"},
		{"two URLs", []string{"-n", "1", srv.URL, srv.URL}, "exactly one URL"},
		{"unknown flag", []string{"-bogus", srv.URL}, "flag provided but not defined"},
		{"c zero", []string{"-c", "0", "-n", "1", srv.URL}, "-c must be in 1..10000, got 0"},
		{"c too big", []string{"-c", "10001", "-n", "1", srv.URL}, "-c must be in 1..10000"},
		{"n zero", []string{"-n", "0", srv.URL}, "-n must be >= 1"},
		{"d zero", []string{"-d", "0s", srv.URL}, "-d must be > 0"},
		{"n and d", []string{"-n", "5", "-d", "1s", srv.URL}, "exactly one of -n or -d"},
		{"neither n nor d", []string{srv.URL}, "exactly one of -n COUNT or -d DURATION"},
		{"rate without d", []string{"-rate", "10", "-n", "5", srv.URL}, "-rate needs -d"},
		{"rate zero", []string{"-rate", "0", "-d", "1s", srv.URL}, "-rate must be in (0, 1e+06] requests/s, got 0"},
		{"rate too high", []string{"-rate", "2e6", "-d", "1s", srv.URL}, "-rate must be in (0, 1e+06] requests/s, got 2e+06"},
		{"timeout zero", []string{"-timeout", "0s", "-n", "1", srv.URL}, "-timeout must be > 0"},
		{"bad scheme", []string{"-n", "1", "ftp://127.0.0.1/"}, "scheme must be http or https"},
		{"remote host", []string{"-n", "1", "http://192.0.2.1/"}, "-allow-remote"},
		{"header without colon", []string{"-n", "1", "-H", "X-Tenant acme", srv.URL}, `invalid value "X-Tenant acme" for flag -H: no colon; want "Name: value"`},
		{"header bad name", []string{"-n", "1", "-H", "X Tenant: acme", srv.URL}, `invalid value "X Tenant: acme" for flag -H: name "X Tenant" is not a valid header name`},
		{"header empty name", []string{"-n", "1", "-H", ": acme", srv.URL}, `for flag -H: name "" is not a valid header name`},
		{"header set by client", []string{"-n", "1", "-H", "Content-Length: 9", srv.URL}, "for flag -H: Content-Length is set by the HTTP client"},
		{"body file missing", []string{"-n", "1", "-body", "@/nonexistent/body", srv.URL}, "-body @/nonexistent/body: open /nonexistent/body: no such file or directory"},
		{"body too large", []string{"-n", "1", "-body", strings.Repeat("x", 1<<20+1), srv.URL}, "-body is 1048577 bytes, want at most 1048576 (or @FILE)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkUsageError(t, append([]string{"load"}, tt.args...), tt.wantErr)
		})
	}
}

func TestLoadPrintsSummary(t *testing.T) {
	verifyNoLeaks(t)
	srv := newLoadServer(t)
	var stdout, stderr bytes.Buffer
	// Flags after the URL are accepted too.
	if err := runLoad(context.Background(), []string{"-c", "2", srv.URL, "-n", "20"}, &stdout, &stderr); err != nil {
		t.Fatalf("runLoad: %v (stderr %q)", err, stderr.String())
	}
	text := strings.Join(strings.Fields(stdout.String()), " ")
	for _, want := range []string{"closed loop, 2 connections", "Completed requests: 20",
		"Failed requests: 0", "Requests per second:", "Latency (ms):", "200 20"} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q; got:\n%s", want, stdout.String())
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("got stderr %q, want nothing (no progress line when stderr is not a terminal)", stderr.String())
	}
}

// TestLoadSendsHeaders: every request carries each -H field, and a
// repeated name sends each of its values.
func TestLoadSendsHeaders(t *testing.T) {
	verifyNoLeaks(t)
	var served, wrong atomic.Int64
	var firstWrong atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		got := fmt.Sprintf("X-Tenant %q, Accept %q", r.Header.Get("X-Tenant"), r.Header.Values("Accept"))
		if want := `X-Tenant "acme", Accept ["text/html" "text/plain"]`; got != want {
			wrong.Add(1)
			firstWrong.CompareAndSwap(nil, "got "+got+"; want "+want)
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	var stdout, stderr bytes.Buffer
	args := []string{"-c", "2", "-n", "20", "-H", "X-Tenant: acme", srv.URL, "-H", "Accept:text/html", "-H", "accept: text/plain"}
	if err := runLoad(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("runLoad: %v (stderr %q)", err, stderr.String())
	}
	if served.Load() != 20 || wrong.Load() != 0 {
		t.Errorf("server saw %d requests, %d with the wrong headers (want 20 and 0); the first: %v", served.Load(), wrong.Load(), firstWrong.Load())
	}
}

// TestLoadSendsBody: -body sends its text (or @FILE's contents) with
// every request, as a POST with a form's Content-Type unless -m and -H
// say otherwise.
func TestLoadSendsBody(t *testing.T) {
	verifyNoLeaks(t)
	file := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(file, []byte(`{"pw":"b"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"text", []string{"-body", "user=a&pw=b"}, `POST application/x-www-form-urlencoded "user=a&pw=b"`},
		{"file, method and type given", []string{"-m", "PUT", "-body", "@" + file, "-H", "Content-Type: application/json"}, `PUT application/json "{\"pw\":\"b\"}"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var served, wrong atomic.Int64
			var firstWrong atomic.Value
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				served.Add(1)
				b, _ := io.ReadAll(r.Body)
				if got := fmt.Sprintf("%s %s %q", r.Method, r.Header.Get("Content-Type"), b); got != tt.want {
					wrong.Add(1)
					firstWrong.CompareAndSwap(nil, "got "+got+"; want "+tt.want)
				}
				w.Write([]byte("ok"))
			}))
			t.Cleanup(srv.Close)
			var stdout, stderr bytes.Buffer
			args := append([]string{"-c", "2", "-n", "10", srv.URL}, tt.args...)
			if err := runLoad(context.Background(), args, &stdout, &stderr); err != nil {
				t.Fatalf("runLoad: %v (stderr %q)", err, stderr.String())
			}
			if served.Load() != 10 || wrong.Load() != 0 {
				t.Errorf("server saw %d requests, %d wrong (want 10 and 0); the first: %v", served.Load(), wrong.Load(), firstWrong.Load())
			}
		})
	}
}

func TestLoadJSON(t *testing.T) {
	verifyNoLeaks(t)
	srv := newLoadServer(t)
	var stdout, stderr bytes.Buffer
	// 500 ms: with 100 ms this test failed now and then on a loaded
	// machine under -race.
	args := []string{"-json", "-c", "2", "-rate", "200", "-d", "500ms", srv.URL}
	if err := runLoad(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("runLoad: %v (stderr %q)", err, stderr.String())
	}
	var got struct {
		Completed    int64            `json:"completed"`
		Failed       *int64           `json:"failed"`
		FailedByKind map[string]int64 `json:"failed_by_kind"`
		RPS          float64          `json:"rps"`
		Elapsed      float64          `json:"elapsed_s"`
		P99          *float64         `json:"p99_ms"`
		StatusCodes  map[string]int64 `json:"status_codes"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("-json output does not parse: %v\n%s", err, stdout.String())
	}
	if got.Completed < 1 || got.StatusCodes["200"] != got.Completed {
		t.Errorf("got completed %d, status 200 count %d; want >= 1 and equal", got.Completed, got.StatusCodes["200"])
	}
	if got.Failed == nil || got.P99 == nil || len(got.FailedByKind) != 4 || got.Elapsed <= 0 {
		t.Errorf("got %s, want failed, p99_ms, four failed_by_kind keys and elapsed_s > 0", stdout.String())
	}
}

func TestProgressWriterNotTerminal(t *testing.T) {
	var buf bytes.Buffer
	if w := progressWriter(&buf); w != nil {
		t.Errorf("got progress writer %v for a buffer, want nil", w)
	}
}
