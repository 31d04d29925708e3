package report

import (
	"errors"
	"strings"
	"testing"
)

// failAfter accepts n writes, then fails every one.
type failAfter struct {
	n   int
	got strings.Builder
}

var errFull = errors.New("full")

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errFull
	}
	f.n--
	return f.got.Write(p)
}

func TestErrWriterKeepsTheFirstError(t *testing.T) {
	dst := &failAfter{n: 2}
	ew := NewErrWriter(dst)
	ew.Printf("a%d ", 1)
	if _, err := ew.Write([]byte("b ")); err != nil {
		t.Fatalf("second write: %v, want it to pass", err)
	}
	if ew.Err() != nil {
		t.Fatalf("Err after two good writes: %v, want nil", ew.Err())
	}
	ew.Printf("c ")
	dst.n = 10 // the destination would take more now: ErrWriter still drops it
	ew.Printf("d ")
	if _, err := ew.Write([]byte("e")); !errors.Is(err, errFull) {
		t.Errorf("write after the failure: %v, want the first error", err)
	}
	if !errors.Is(ew.Err(), errFull) {
		t.Errorf("Err: %v, want the first error", ew.Err())
	}
	if got := dst.got.String(); got != "a1 b " {
		t.Errorf("written %q, want only what came before the failure, %q", got, "a1 b ")
	}
}
