package demo

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
)

// queryParams are the query parameters the endpoints read: a 400 names one.
var queryParams = []string{"d", "n", "sched", "checkpoint", "class", "nice", "group"}

// checkBadRequest checks a 400 answer to a request with query q: its body
// is one line "param: reason", where param is a parameter of q.
func checkBadRequest(t *testing.T, rec *httptest.ResponseRecorder, q url.Values) {
	t.Helper()
	body := rec.Body.String()
	param, _, _ := strings.Cut(body, ": ")
	if strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") || !slices.Contains(queryParams, param) || !q.Has(param) {
		t.Fatalf("got 400 %q, want one line naming one of the request's parameters %v", body, queryParams)
	}
}

// FuzzChecksumQuery: parseChecksum never panics; what it accepts is in
// range (passes 1..1000000, task options the scheduler takes, so sched=1
// never gets a 500), and what it refuses it names, with a one-line reason
// that quotes the value and gives the valid range.
func FuzzChecksumQuery(f *testing.F) {
	for _, q := range []string{"", "n=1", "n=1000000", "n=1000001", "n=0", "n=-1", "n=1e3", "n=+5", "n=0x10",
		"n=99999999999999999999", "sched=1&class=idle&nice=-20&group=g", "sched=2", "nice=19", "nice=20",
		"class=Normal", "class=%00", "group=" + strings.Repeat("g", 257), "n=5;sched=1", "n=%zz", "nice=%0a", "checkpoint=0&sched=1", "checkpoint=2"} {
		f.Add(q, false)
	}
	f.Add("sched=0", true)
	f.Fuzz(func(t *testing.T, rawQuery string, smallTask bool) {
		defaultPasses, defaultSched := 0, false
		if smallTask { // the defaults of /checksumSmallTaskWithCpuWorker
			defaultPasses, defaultSched = SmallTaskPasses, true
		}
		r := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/checksum", RawQuery: rawQuery}}
		q := r.URL.Query()
		p, param, reason := parseChecksum(r, defaultPasses, defaultSched)
		if param == "" {
			if p.passes < MinPasses || p.passes > MaxPasses {
				t.Fatalf("%q: accepted with %d passes, outside %d..%d", rawQuery, p.passes, MinPasses, MaxPasses)
			}
			if err := cpusched.CheckTaskOptions(p.opts...); err != nil {
				t.Fatalf("%q: accepted with task options the scheduler refuses: %v", rawQuery, err)
			}
			if n, err := strconv.Atoi(q.Get("n")); q.Has("n") && (err != nil || n != p.passes) {
				t.Fatalf("%q: got %d passes, want n=%s", rawQuery, p.passes, q.Get("n"))
			}
			return
		}
		if !slices.Contains(queryParams, param) || !q.Has(param) {
			t.Fatalf("%q: refused naming %q, which is not a parameter of the request", rawQuery, param)
		}
		if strings.ContainsAny(reason, "\r\n") {
			t.Fatalf("%q: reason %q is not one line", rawQuery, reason)
		}
		wantIn := map[string]string{"n": "1..1000000", "nice": "-20..19", "sched": "0", "checkpoint": "0", "class": "normal, realtime, batch, idle", "group": "256"}[param]
		if param != "group" && !strings.Contains(reason, strconv.Quote(q.Get(param))) || !strings.Contains(reason, wantIn) {
			t.Fatalf("%q: %s: reason %q does not quote the value and give the valid range (%s)", rawQuery, param, reason, wantIn)
		}
	})
}

// FuzzDelayQuery: /delay never panics; it answers 400 naming d, with the
// range, exactly when d is given and is not a duration in 1us..10s, and
// 200 otherwise. The request's context is already cancelled, so a valid d
// costs no sleep.
func FuzzDelayQuery(f *testing.F) {
	for _, q := range []string{"", "d=1ms", "d=1us", "d=999ns", "d=10s", "d=10.000000001s", "d=0", "d=-1ms", "d=1",
		"d=9223372036854775807ns", "d=1h", "d=", "d=1ms&d=x", "d=%ff", "d=1m%0a"} {
		f.Add(q)
	}
	s := &Server{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, rawQuery string) {
		r := (&http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/delay", RawQuery: rawQuery}}).WithContext(ctx)
		q := r.URL.Query()
		rec := httptest.NewRecorder()
		s.handleDelay(rec, r)
		d, err := time.ParseDuration(q.Get("d"))
		valid := !q.Has("d") || err == nil && d >= MinDelay && d <= MaxDelay
		switch {
		case valid && rec.Code == http.StatusOK:
		case !valid && rec.Code == http.StatusBadRequest:
			checkBadRequest(t, rec, q)
			if want := "d: must be a duration in 1us..10s"; !strings.HasPrefix(rec.Body.String(), want) {
				t.Fatalf("%q: got 400 %q, want it to start with %q", rawQuery, rec.Body.String(), want)
			}
		default:
			t.Fatalf("%q: got %d %q; want 200 for a valid d (or none), 400 for another", rawQuery, rec.Code, rec.Body.String())
		}
	})
}

// canonicalPath reports whether p is in the form net/http's ServeMux
// serves without redirecting: clean, with a trailing slash allowed.
func canonicalPath(p string) bool {
	c := path.Clean(p)
	return p == c || c != "/" && p == c+"/"
}

// fuzzRequestTimeout bounds the work of one request of FuzzHandler: a
// request that asks for more (a long /delay, the default 10,000-20,000
// checksum passes) ends there, as if the client had gone.
const fuzzRequestTimeout = 10 * time.Millisecond

// FuzzHandler sends requests of random methods, paths and queries through
// the server's whole handler: it never panics, and answers only the
// documented statuses (405 with an Allow header; 400 with one line naming a
// parameter of the request; 307 only for a path not in canonical form). The pprof routes are left out (net/http/pprof's
// own handlers, some of which run for seconds).
func FuzzHandler(f *testing.F) {
	for _, target := range []string{"/delay", "/delay?d=50us", "/delay?d=11s", "/delay1ms", "/checksum?n=3",
		"/checksum?n=2&sched=1&class=batch&nice=5&group=g1", "/checksum?n=0", "/checksumWithoutCpuWorker?n=2",
		"/checksumWithCpuWorker?n=2&nice=30", "/checksumSmallTaskWithCpuWorker", "/checksumSmallTaskWithCpuWorker?sched=0",
		"/stats", "/metrics", "/", "/nope", "/checksum/", "/delay?d=1ms&d=x", "/checksum?n=1&class=%zz", "/.", "//delay", "/checksum/../delay?d=1us"} {
		f.Add("GET", target)
	}
	f.Add("HEAD", "/checksum?n=1")
	f.Add("POST", "/checksum?n=1")
	f.Add("DELETE", "/stats")
	s, err := NewServer(Config{Isolation: cpusched.IsolationNone, Workers: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			f.Errorf("Close: %v", err)
		}
	})
	h := s.Handler()
	f.Fuzz(func(t *testing.T, method, target string) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		u, err := url.ParseRequestURI(target)
		if err != nil || strings.Contains(u.Path, "pprof") {
			return // net/http answers 400 before the handler; pprof is not ours
		}
		ctx, cancel := context.WithTimeout(context.Background(), fuzzRequestTimeout)
		defer cancel()
		r, err := http.NewRequestWithContext(ctx, method, "/", nil)
		if err != nil {
			return // not a method token: net/http answers 400 before the handler
		}
		r.URL, r.RequestURI = u, target
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		switch rec.Code {
		case http.StatusOK, http.StatusNotFound, http.StatusServiceUnavailable:
		case http.StatusMethodNotAllowed:
			if !strings.Contains(rec.Header().Get("Allow"), "GET") {
				t.Fatalf("%s %q: got 405 with Allow %q, want GET in it", method, target, rec.Header().Get("Allow"))
			}
		case http.StatusBadRequest:
			checkBadRequest(t, rec, u.Query())
		case http.StatusTemporaryRedirect:
			if canonicalPath(u.EscapedPath()) || rec.Header().Get("Location") == "" {
				t.Fatalf("%s %q: got 307 to %q, want it only for a path not in canonical form", method, target, rec.Header().Get("Location"))
			}
		default:
			t.Fatalf("%s %q: got %d %q, want 200, 307, 400, 404, 405 or 503", method, target, rec.Code, rec.Body.String())
		}
	})
}

// TestNonCanonicalPathRedirects pins what FuzzHandler found undocumented: a
// path not in canonical form gets 307 to the clean path (net/http's
// ServeMux), query kept, not 404.
func TestNonCanonicalPathRedirects(t *testing.T) {
	s, err := NewServer(Config{Isolation: cpusched.IsolationNone, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for target, want := range map[string]string{"/.": "/", "//delay?d=1us": "/delay?d=1us", "/x/../checksum?n=1": "/checksum?n=1"} {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		if rec.Code != http.StatusTemporaryRedirect || rec.Header().Get("Location") != want {
			t.Errorf("GET %s: got %d Location %q, want 307 to %q", target, rec.Code, rec.Header().Get("Location"), want)
		}
	}
}
