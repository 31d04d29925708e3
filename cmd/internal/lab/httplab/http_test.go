package httplab

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines. fasthttp's worker pool cleaner
// sleeps MaxIdleWorkerDuration (10 s) before it sees Shutdown, so it outlives
// the test by design; it is the one goroutine ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}

func TestConfigValidate(t *testing.T) {
	valid := Config{Servers: []string{"go"}, Concurrency: 1, Requests: 1}
	tests := []struct {
		name    string
		mod     func(*Config)
		wantErr string
	}{
		{"valid", func(*Config) {}, ""},
		{"all servers", func(c *Config) { c.Servers = Servers }, ""},
		{"empty servers", func(c *Config) { c.Servers = nil }, "-servers must not be empty (valid: go, martini, fasthttp, gin, cpusched, node, jvm)"},
		{"unknown server", func(c *Config) { c.Servers = []string{"finagle"} }, `-servers: unknown server "finagle" (valid: go, martini`},
		{"c zero", func(c *Config) { c.Concurrency = 0 }, "-c must be in 1..10000, got 0"},
		{"n zero", func(c *Config) { c.Requests = 0 }, "-n must be >= 1, got 0"},
		{"warmup negative", func(c *Config) { c.Warmup = -1 }, "-warmup must be >= 0, got -1"},
	}
	for _, tt := range tests {
		c := valid
		tt.mod(&c)
		err := c.Validate()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: got error %v, want none", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: got error %v, want one containing %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestBody(t *testing.T) {
	b := Body()
	if got, want := len(b), 1<<20; got != want {
		t.Fatalf("len(Body()): got %d, want %d", got, want)
	}
	if got, want := string(b[:28]), "abcdefghijklmnopqrstuvwxyzab"; got != want {
		t.Errorf("Body()[:28]: got %q, want %q", got, want)
	}
}

func TestLineWriter(t *testing.T) {
	w := newLineWriter()
	for _, p := range []string{"127.0.0", ".1:80", "80\nmore", " output\n"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q): got (%d, %v), want (%d, nil)", p, n, err, len(p))
		}
	}
	if got, want := <-w.first, "127.0.0.1:8080"; got != want {
		t.Errorf("first line: got %q, want %q", got, want)
	}
	var b limitedBuffer
	b.Write(bytes.Repeat([]byte("x"), 5000))
	if got, want := len(b.String()), 4096; got != want {
		t.Errorf("limitedBuffer kept %d bytes, want %d", got, want)
	}
}

// TestRunSkipsMissingPrograms takes the skip path of node and jvm with a
// LookPath that finds nothing (as on a machine without them).
func TestRunSkipsMissingPrograms(t *testing.T) {
	notFound := func(file string) (string, error) { return "", errors.New("not found: " + file) }
	javacOnly := func(file string) (string, error) {
		if file == "javac" {
			return "/usr/bin/javac", nil
		}
		return "", errors.New("not found: " + file)
	}
	tests := []struct {
		lookPath func(string) (string, error)
		want     []string
	}{
		{notFound, []string{"skipped: node not installed", "skipped: javac not installed (no JDK)"}},
		{javacOnly, []string{"skipped: node not installed", "skipped: java not installed"}},
	}
	for _, tt := range tests {
		cfg := Config{Servers: []string{"node", "jvm"}, Concurrency: 1, Requests: 1, LookPath: tt.lookPath}
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		for i, r := range res {
			if r.Skipped != tt.want[i] || r.Summary != nil {
				t.Errorf("row %s: got Skipped %q (summary %v), want %q and no summary", r.Server, r.Skipped, r.Summary, tt.want[i])
			}
		}
	}
}

// TestServe starts each Go server in-process and checks one response.
func TestServe(t *testing.T) {
	for _, name := range GoServers {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			pr, pw := io.Pipe()
			done := make(chan error, 1)
			go func() { done <- Serve(ctx, name, "127.0.0.1:0", pw); pw.Close() }()
			lw := newLineWriter()
			go io.Copy(lw, pr)
			var addr string
			select {
			case addr = <-lw.first:
			case err := <-done:
				t.Fatalf("Serve returned early: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("no address line")
			}
			client := &http.Client{Transport: &http.Transport{}}
			resp, err := client.Get("http://" + addr + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			client.CloseIdleConnections()
			if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, Body()) {
				t.Errorf("GET: got status %d, %d bytes, err %v; want 200 and the 1 MiB body", resp.StatusCode, len(body), err)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve after cancel: got %v, want nil", err)
			}
		})
	}
}

func TestServeUnknown(t *testing.T) {
	if err := Serve(context.Background(), "node", "127.0.0.1:0", io.Discard); err == nil || !strings.Contains(err.Error(), `no Go handler for server "node"`) {
		t.Errorf("got %v, want an error naming the server", err)
	}
}
