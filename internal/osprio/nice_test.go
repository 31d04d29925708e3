package osprio

import (
	"runtime"
	"testing"
)

// TestLowerNice: a thread lowered to a nice value, then to SCHED_IDLE,
// reads as Idle with that nice value, and is not the setting Lower makes
// from nice 0.
func TestLowerNice(t *testing.T) {
	if !Supported() {
		t.Skip("no per-thread priorities on this platform")
	}
	errc := make(chan error, 1)
	var got Attr
	go func() {
		runtime.LockOSThread() // never unlocked: the runtime discards the lowered thread
		if err := LowerNice(0, 10, 0); err != nil {
			errc <- err
			return
		}
		a, err := Current()
		if err == nil && (a.Nice() != 10 || a.Idle()) {
			t.Errorf("after LowerNice(0, 10, 0): %v, want policy 0 nice 10", a)
		}
		if err == nil {
			err = Lower()
		}
		if err == nil {
			got, err = Current()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Skipf("this machine refuses: %v", err)
	}
	if !got.Idle() || got.Nice() != 10 || got.Lowered() {
		t.Errorf("after LowerNice(0, 10, 0) and Lower: %v (Idle %v, Lowered %v), want SCHED_IDLE at nice 10, Idle and not Lowered", got, got.Idle(), got.Lowered())
	}
}
