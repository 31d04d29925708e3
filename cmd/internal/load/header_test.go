package load

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

func TestParseHeaderLine(t *testing.T) {
	tests := []struct {
		line      string
		wantName  string
		wantValue string
		wantErr   string // "" means valid
	}{
		{"X-Tenant: acme", "X-Tenant", "acme", ""},
		{"x-tenant:acme", "x-tenant", "acme", ""},
		{"X-Tenant: \t acme corp \t", "X-Tenant", "acme corp", ""},
		{"X-Empty:", "X-Empty", "", ""},
		{"Authorization: Basic a:b", "Authorization", "Basic a:b", ""},
		{"Host: example.test", "Host", "example.test", ""},
		{"X-Tenant acme", "", "", `no colon; want "Name: value"`},
		{"", "", "", "no colon"},
		{": acme", "", "", `name "" is not a valid header name`},
		{"X Tenant: acme", "", "", `name "X Tenant" is not a valid header name`},
		{"X-Tenant : acme", "", "", `name "X-Tenant " is not a valid header name`},
		{"X/Tenant: acme", "", "", `name "X/Tenant" is not a valid header name`},
		{"X-Tenant: ac\r\nX-Evil: 1", "", "", `value of X-Tenant holds control character '\r' at byte 2`},
		{"X-Tenant: a\x7f", "", "", `control character '\x7f'`},
		{"content-length: 3", "", "", "Content-Length is set by the HTTP client"},
		{"Transfer-Encoding: chunked", "", "", "Transfer-Encoding is set by the HTTP client"},
	}
	for _, tt := range tests {
		name, value, err := ParseHeaderLine(tt.line)
		switch {
		case tt.wantErr == "" && (err != nil || name != tt.wantName || value != tt.wantValue):
			t.Errorf("ParseHeaderLine(%q): got %q, %q, %v; want %q, %q, nil", tt.line, name, value, err, tt.wantName, tt.wantValue)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ParseHeaderLine(%q): got error %v, want one containing %q", tt.line, err, tt.wantErr)
		}
	}
}

// TestValidateHeader: Validate refuses a Header that ParseHeaderLine
// would not have built, naming the field (and its flag for the CLI).
func TestValidateHeader(t *testing.T) {
	ok := Config{URL: "http://127.0.0.1:8080/x", Concurrency: 4, Requests: 10}
	tests := []struct {
		header  http.Header
		wantErr string // "" means valid
	}{
		{http.Header{"X-Tenant": {"acme"}, "Host": {"a.test"}}, ""},
		{http.Header{"X Tenant": {"acme"}}, `load: Header (-H): name "X Tenant" is not a valid header name`},
		{http.Header{"X-Tenant": {"ok", "a\nb"}}, `load: Header (-H): value of X-Tenant holds control character '\n' at byte 1`},
		{http.Header{"Content-Length": {"3"}}, "load: Header (-H): Content-Length is set by the HTTP client"},
	}
	for _, tt := range tests {
		c := ok
		c.Header = tt.header
		err := c.Validate()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("Header %v: got error %q, want nil", tt.header, err)
		case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
			t.Errorf("Header %v: got error %v, want one starting %q", tt.header, err, tt.wantErr)
		}
	}
	c := ok
	c.Header = http.Header{"X Tenant": {"acme"}}
	if err := c.ValidateFlags(func(string) bool { return false }); err == nil || !strings.HasPrefix(err.Error(), `load: -H: name "X Tenant"`) {
		t.Errorf(`ValidateFlags: got error %v, want one starting "load: -H: name \"X Tenant\""`, err)
	}
}

// TestRunSendsHeader: every request carries Config.Header, whose
// User-Agent replaces the default and whose Host becomes the request's
// host.
func TestRunSendsHeader(t *testing.T) {
	var wrong atomic.Int64
	var firstWrong atomic.Value
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		got := fmt.Sprintf("tenant %q, accept %q, agent %q, host %q",
			r.Header.Values("X-Tenant"), r.Header.Get("Accept"), r.Header.Get("User-Agent"), r.Host)
		want := `tenant ["acme" "beta"], accept "text/html", agent "tester", host "tenant.test"`
		if got != want {
			wrong.Add(1)
			firstWrong.CompareAndSwap(nil, "got "+got+"; want "+want)
		}
		hello(w, r)
	})
	header := http.Header{}
	header.Add("X-Tenant", "acme")
	header.Add("x-tenant", "beta")
	header.Add("Accept", "text/html")
	header.Add("User-Agent", "tester")
	header.Add("Host", "tenant.test")
	res, err := Run(context.Background(), Config{URL: srv.URL, Concurrency: 3, Requests: 30, Header: header})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Completed != 30 {
		t.Errorf("got %d completed, want 30", res.Completed)
	}
	if n := wrong.Load(); n != 0 {
		t.Errorf("%d of 30 requests had the wrong headers; the first: %v", n, firstWrong.Load())
	}
}

// TestRunSendsBody: every request carries Body whole, with its length,
// under concurrency (each request reads a reader of its own), and a body
// over MaxBody is refused before anything is sent.
func TestRunSendsBody(t *testing.T) {
	body := []byte("user=a&pw=" + strings.Repeat("x", 5000))
	var wrong atomic.Int64
	var firstWrong atomic.Value
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		got, err := io.ReadAll(r.Body)
		if err != nil || r.Method != http.MethodPost || r.ContentLength != int64(len(body)) || !bytes.Equal(got, body) {
			wrong.Add(1)
			firstWrong.CompareAndSwap(nil, fmt.Sprintf("%s with Content-Length %d, %d bytes read (err %v)", r.Method, r.ContentLength, len(got), err))
		}
		hello(w, r)
	})
	res, err := Run(context.Background(), Config{URL: srv.URL, Method: http.MethodPost, Concurrency: 4, Requests: 40, Body: body})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Completed != 40 {
		t.Errorf("got %d completed, want 40", res.Completed)
	}
	if n := wrong.Load(); n != 0 {
		t.Errorf("%d of 40 requests had the wrong body; the first: %v", n, firstWrong.Load())
	}
	_, err = Run(context.Background(), Config{URL: srv.URL, Method: http.MethodPost, Concurrency: 1, Requests: 1, Body: make([]byte, MaxBody+1)})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("Body (-body) is %d bytes, want at most %d", MaxBody+1, MaxBody)) {
		t.Errorf("Run with a body of MaxBody+1 bytes: got %v, want the limit named", err)
	}
}
