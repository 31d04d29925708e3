package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestLabHTTPUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown server", []string{"-servers", "finagle"}, `-servers: unknown server "finagle" (valid: go, martini, fasthttp, gin, cpusched, node, jvm)`},
		{"empty servers", []string{"-servers", ","}, "-servers must not be empty"},
		{"c zero", []string{"-c", "0"}, "-c must be in 1..10000, got 0"},
		{"n negative", []string{"-n", "-5"}, "-n must be >= 1, got -5"},
		{"warmup negative", []string{"-warmup", "-1"}, "-warmup must be >= 0"},
	}
	for _, tt := range tests {
		checkUsageError(t, append([]string{"lab", "http"}, tt.args...), tt.want)
	}
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"lab-child", "http", "node"}, &stdout, &stderr); code != 2 {
		t.Errorf("lab-child http node: got exit %d, want 2", code)
	}
}

// TestLabHTTPSkipsMissing runs the node and jvm rows with a lookup that finds
// nothing, as on a machine without Node.js or a JDK.
func TestLabHTTPSkipsMissing(t *testing.T) {
	verifyNoLeaks(t)
	old := labHTTPLookPath
	t.Cleanup(func() { labHTTPLookPath = old })
	labHTTPLookPath = func(file string) (string, error) { return "", errors.New("executable file not found in $PATH") }
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), []string{"lab", "http", "-servers", "node,jvm", "-n", "1"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, stderr.String())
	}
	for _, want := range []string{"skipped: node not installed", "skipped: javac not installed (no JDK)", "Node.js 2,301 req/s"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("got table %q, want it to contain %q", stdout.String(), want)
		}
	}
}
