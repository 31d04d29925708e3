package leakcheck

import (
	"strings"
	"testing"
)

func TestMain(m *testing.M) { VerifyTestMain(m) }

// TestFindsABlockedGoroutine: a goroutine started after the snapshot and
// still blocked is reported, with its stack; once it ends, nothing is.
func TestFindsABlockedGoroutine(t *testing.T) {
	before := Current()
	release, started, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		blockedHere(started, release)
	}()
	<-started
	leaked := findNow(before)
	if len(leaked) != 1 || !strings.Contains(leaked[0], "leakcheck.blockedHere") {
		t.Errorf("with one goroutine blocked, found %d: %q; want it, in blockedHere", len(leaked), leaked)
	}
	close(release)
	<-done
	if leaked := find(before); len(leaked) != 0 {
		t.Errorf("after it ended, found %q; want none", leaked)
	}
}

// TestIgnoresWhatTheSnapshotHolds: goroutines running at the snapshot are
// not reported.
func TestIgnoresWhatTheSnapshotHolds(t *testing.T) {
	release, started, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		blockedHere(started, release)
	}()
	<-started
	defer func() { close(release); <-done }()
	if leaked := findNow(Current()); len(leaked) != 0 {
		t.Errorf("goroutines in the snapshot were reported: %q", leaked)
	}
}

func blockedHere(started, release chan struct{}) {
	close(started)
	<-release
}
