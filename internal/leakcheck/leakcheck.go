// Package leakcheck finds goroutines a test left running, and dumps them
// all when a stress test hangs (Watchdog). It does what
// go.uber.org/goleak does for this module's tests, with the standard
// library only: the library's module requires golang.org/x/sys and nothing
// else, tests included, so that a user's go.mod lists no module of ours
// but the library and x/sys (docs/modules.md). The other modules of the
// repository use goleak itself.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"
)

// wait is how long a check waits for goroutines to finish before it
// reports them: goroutines that are ending (a closed scheduler's last
// worker, an HTTP server's connection goroutines) take a moment.
const wait = 5 * time.Second

// A Snapshot is the set of goroutines running when it was taken.
type Snapshot map[string]bool

// Current returns the goroutines running now, so that a later check
// ignores them (goleak's IgnoreCurrent).
func Current() Snapshot {
	s := Snapshot{}
	for _, g := range goroutines() {
		s[g.id] = true
	}
	return s
}

// VerifyNone fails t if goroutines other than the caller's, the testing
// package's and those in ignore are still running after a grace period.
func VerifyNone(t testing.TB, ignore Snapshot) {
	t.Helper()
	if leaked := find(ignore); len(leaked) > 0 {
		t.Errorf("leakcheck: %d goroutines left running:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
}

// VerifyTestMain runs the tests, then fails the run if they left
// goroutines running (goleak's VerifyTestMain).
func VerifyTestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := find(nil); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "leakcheck: after the tests, %d goroutines are still running:\n\n%s\n", len(leaked), strings.Join(leaked, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// find returns the stacks of goroutines that are neither expected nor in
// ignore, once they have had wait to end.
func find(ignore Snapshot) []string {
	deadline := time.Now().Add(wait)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		leaked := findNow(ignore)
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(delay)
	}
}

// findNow is find without the wait.
func findNow(ignore Snapshot) []string {
	var leaked []string
	for _, g := range goroutines() {
		if !ignore[g.id] && !expected(g) {
			leaked = append(leaked, g.stack)
		}
	}
	return leaked
}

type goroutine struct {
	id    string // "goroutine 7"
	top   string // the function it is in
	stack string
}

// goroutines parses runtime.Stack's dump of every goroutine but the
// caller's.
func goroutines() []goroutine {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	records := strings.Split(string(buf), "\n\n")
	var out []goroutine
	for i, r := range records {
		if i == 0 {
			continue // the caller, which runtime.Stack lists first
		}
		header, rest, _ := strings.Cut(r, "\n")
		id, _, _ := strings.Cut(header, " [")
		top, _, _ := strings.Cut(rest, "\n")
		if i := strings.LastIndex(top, "("); i > 0 {
			top = top[:i]
		}
		out = append(out, goroutine{id: id, top: top, stack: r})
	}
	return out
}

// expectedTop are the functions in which the testing package's and the
// runtime's own goroutines wait.
var expectedTop = []string{
	"testing.RunTests",
	"testing.(*T).Run",
	"testing.(*T).Parallel",
	"testing.runFuzzing",
	"testing.(*F).Fuzz",
	"testing.tRunner.func1",
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.goexit",
	"runtime.ReadTrace",
	"runtime/trace.Start.func1",
}

func expected(g goroutine) bool {
	if slices.Contains(expectedTop, g.top) {
		return true
	}
	// A parallel test waiting for its turn, or the test binary's alarm.
	return strings.Contains(g.stack, "testing.(*testState).waitParallel") ||
		strings.Contains(g.stack, "testing.(*M).startAlarm")
}

// Watchdog dumps every goroutine to standard error and panics, naming
// the test, if it is not stopped within d: a stress test that hangs shows
// where instead of waiting for the test binary's timeout. Stop it with
// the returned func, deferred.
func Watchdog(t testing.TB, d time.Duration) (stop func() bool) {
	name := t.Name()
	timer := time.AfterFunc(d, func() {
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		panic(fmt.Sprintf("%s: stuck for %v", name, d))
	})
	return timer.Stop
}
