package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The command fuzzers run `cpusched CMD ARGS` through dispatch with a
// context that is already cancelled, as if Ctrl-C came the moment the
// command started: it parses and validates its flags as usual, and whatever
// a valid command line starts stops at once. A fuzz input is the arguments,
// one per line.

// fuzzCommandTimeout is how long a fuzzed command may take: it has nothing
// to do beyond parsing, so one that takes longer hangs.
const fuzzCommandTimeout = 10 * time.Second

// fuzzArgs splits a fuzz input into arguments, one per line.
func fuzzArgs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// flagNamePattern finds the flag names in a command's -h output.
var flagNamePattern = regexp.MustCompile(`(?m)^  -([a-zA-Z][a-z0-9-]*)`)

// flagMention returns a pattern that finds a mention (-NAME) of one of the
// flags of command name, as its -h output lists them.
func flagMention(tb testing.TB, name string) *regexp.Regexp {
	tb.Helper()
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{name, "-h"}, &stdout, &stderr); code != 0 {
		tb.Fatalf("cpusched %s -h: exit %d, %s", name, code, stderr.String())
	}
	var names []string
	for _, m := range flagNamePattern.FindAllStringSubmatch(stderr.String(), -1) {
		names = append(names, regexp.QuoteMeta(m[1]))
	}
	if len(names) == 0 {
		tb.Fatalf("cpusched %s -h lists no flags: %q", name, stderr.String())
	}
	return regexp.MustCompile(`(^|[^a-z-])-(` + strings.Join(names, "|") + `)($|[^a-z0-9-])`)
}

// fuzzCommand runs `cpusched name args` with a cancelled context and checks
// that it returns within fuzzCommandTimeout with an exit status in okCodes,
// and that a usage error (exit 2) prints nothing on stdout and, as the last
// line of stderr, a message that names what was wrong: one of the command's
// flags, a flag the flag package refused, the URL or an argument. It
// returns the exit status and that last line.
func fuzzCommand(t *testing.T, name string, flags *regexp.Regexp, args []string, okCodes ...int) (code int, last string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- dispatch(ctx, append([]string{name}, args...), &stdout, &stderr) }()
	select {
	case code = <-done:
	case <-time.After(fuzzCommandTimeout):
		t.Fatalf("cpusched %s %q: still running after %v with its context cancelled", name, args, fuzzCommandTimeout)
	}
	lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	last = lines[len(lines)-1]
	if !slices.Contains(okCodes, code) {
		t.Fatalf("cpusched %s %q: exit %d (%s), want one of %v", name, args, code, last, okCodes)
	}
	if code != 2 {
		return code, last
	}
	prefix := "cpusched " + name + ": "
	msg, ok := strings.CutPrefix(last, prefix)
	if !ok || stdout.Len() != 0 {
		t.Fatalf("cpusched %s %q: usage error with stdout %q, last line of stderr %q; want no stdout and %q first", name, args, stdout.String(), last, prefix)
	}
	if !flags.MatchString(msg) && !strings.Contains(msg, "flag") && !strings.Contains(msg, "argument") && !strings.Contains(msg, "URL") {
		t.Fatalf("cpusched %s %q: usage error %q names no flag, URL or argument", name, args, msg)
	}
	return code, last
}

// FuzzLoadArgs: `cpusched load` with random arguments (the line URL stands
// for an httptest server's; no other host is ever given, so nothing but
// that server could be reached) exits 0 with the partial summary or 2 with
// a message naming the bad flag, and never hangs.
func FuzzLoadArgs(f *testing.F) {
	for _, args := range []string{"URL\n-n\n1", "-c\n0\n-n\n1\nURL", "-c\n10001\n-d\n1s\nURL", "-n\n0\nURL", "-d\n-1s\nURL",
		"-n\n5\n-d\n1s\nURL", "URL", "-rate\n10\n-n\n5\nURL", "-rate\nNaN\n-d\n1s\nURL", "-rate\n+Inf\n-d\n1s\nURL",
		"-rate\n200\n-d\n1h\n-c\n2\nURL", "-timeout\n0s\n-n\n1\nURL", "-m\nGE T\n-n\n1\nURL", "-m\n\n-n\n1\nURL",
		"-n\n1\nftp:x", "-n\n1\nURL\nURL", "-n\n1\n--\n-URL", "-bogus\nURL", "-h", "-n\n1\n-json\n-k\n-allow-remote\nURL",
		"-rate\n1e-300\n-d\n1s\nURL", "-H\nX-Tenant: acme\n-n\n1\nURL", "-H\nX-Tenant\n-n\n1\nURL", "-H\nX Y: 1\nURL"} {
		f.Add(args)
	}
	flags := flagMention(f, "load")
	srv := httptest.NewServer(http.NotFoundHandler()) // with the context cancelled, no request is sent
	f.Cleanup(srv.Close)
	f.Fuzz(func(t *testing.T, input string) {
		args := fuzzArgs(input)
		for i, a := range args {
			if strings.Contains(a, "//") {
				return // a URL of its own: never let a fuzz input name a host
			}
			if a == "URL" {
				args[i] = srv.URL
			}
		}
		fuzzCommand(t, "load", flags, args, 0, 2)
	})
}

// FuzzServeArgs: `cpusched serve` with random arguments, and a random
// -addr that cannot bind anything but 127.0.0.1:0 (after them, so it wins
// over any other), exits 0 after serving until its context ends or 2 with
// a message naming the bad flag.
func FuzzServeArgs(f *testing.F) {
	for _, args := range []string{"", "-isolation\nnone", "-isolation\nturbo", "-isolation\n", "-workers\n0", "-workers\n1025",
		"-workers\n-1", "-slice\n49us", "-slice\n100ms", "-slice\n-1ms", "-isolation\nospriority\n-workers\n3\n-slice\n4ms",
		"-gc", "-gc=maybe", "now", "--\n-workers", "-h"} {
		f.Add(args, "127.0.0.1:0")
	}
	for _, addr := range []string{"foo", "127.0.0.1", "127.0.0.1:99999", "127.0.0.1:-1", "localhost:x", "[::1", ":"} {
		f.Add("", addr)
	}
	flags := flagMention(f, "serve")
	f.Fuzz(func(t *testing.T, input, addr string) {
		if !harmlessAddr(addr) {
			addr = "127.0.0.1:0"
		}
		args := append(fuzzArgs(input), "-addr="+addr)
		fuzzCommand(t, "serve", flags, args, 0, 2)
	})
}

// harmlessAddr reports whether listening on addr binds nothing, or only
// an ephemeral port of a loopback address: addr is not host:port, or its
// host is loopback and its port is 0, out of range or no port at all.
func harmlessAddr(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return true
	}
	if host != "127.0.0.1" && host != "::1" && host != "localhost" {
		return false
	}
	if n, err := strconv.Atoi(port); err == nil {
		return n <= 0 || n > 65535
	}
	_, err = net.LookupPort("tcp", port) // a service name (/etc/services) binds its port
	return err != nil
}

// FuzzBenchArgs: `cpusched bench` with random arguments exits 2 with a
// message naming the bad flag, or, for a valid command line, 1 saying it
// was interrupted (the server it starts for the first mode is stopped at
// once). Inputs that mention an output file or a CPU quota are skipped: a
// fuzz input must not write files or make cgroups.
func FuzzBenchArgs(f *testing.F) {
	for _, args := range []string{"-modes\nnone,turbo", "-modes\nnone,none", "-modes\n,", "-step\n0s", "-step\n10m1s", "-quick\n-step\n0s",
		"-probe-rate\n0", "-probe-rate\nNaN", "-probe-rate\n10001", "-hog-c\n0", "-small-rate\n10001", "-workers\n1025", "-slice\n1h",
		"now", "-bogus", "-h", "-modes\nnone\n-quick", "-modes\nfloor:2", "-modes\nfloor,none", "-io-c\n0", "-io-c\n1001"} {
		f.Add(args)
	}
	flags := flagMention(f, "bench")
	f.Fuzz(func(t *testing.T, input string) {
		if strings.Contains(input, "out") || strings.Contains(input, "json") || strings.Contains(input, "quota") {
			return
		}
		code, last := fuzzCommand(t, "bench", flags, fuzzArgs(input), 0, 1, 2)
		if code == 1 && last != "cpusched bench: interrupted" {
			t.Fatalf("cpusched bench %q: exit 1 with %q, want \"interrupted\" (its context was cancelled)", fuzzArgs(input), last)
		}
	})
}
