package osprio

import (
	"runtime"
	"strings"
	"testing"
	"time"
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
		if err := LowerNice(0, 10); err != nil {
			errc <- err
			return
		}
		a, err := Current()
		if err == nil && (a.Nice() != 10 || a.Idle()) {
			t.Errorf("after LowerNice(0, 10): %v, want policy 0 nice 10", a)
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
		t.Errorf("after LowerNice(0, 10) and Lower: %v (Idle %v, Lowered %v), want SCHED_IDLE at nice 10, Idle and not Lowered", got, got.Idle(), got.Lowered())
	}
}

// TestLowerNiceSlice: the thread gets the nice value and the slice, the
// default slice again on Restore, and a slice out of the kernel's range is
// refused with the range named.
func TestLowerNiceSlice(t *testing.T) {
	for _, bad := range []time.Duration{time.Microsecond, 99 * time.Microsecond, 101 * time.Millisecond, -time.Millisecond} {
		if err := LowerNiceSlice(0, 10, bad); err == nil || !strings.Contains(err.Error(), "want 0 or 100µs..100ms") {
			t.Errorf("LowerNiceSlice(0, 10, %v): %v, want the range named", bad, err)
		}
	}
	if !Supported() {
		t.Skip("no per-thread priorities on this platform")
	}
	type result struct {
		attr                 Attr
		slice, before, after time.Duration
		err                  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the runtime discards the lowered thread
		var r result
		before, err := Current()
		if err == nil {
			r.before, err = ThreadSlice(0)
		}
		if err == nil {
			err = LowerNiceSlice(0, 10, 300*time.Microsecond)
		}
		if err == nil {
			r.attr, err = Current()
		}
		if err == nil {
			r.slice, err = ThreadSlice(0)
		}
		if err == nil && before.Restore() == nil {
			r.after, err = ThreadSlice(0)
		}
		r.err = err
		done <- r
	}()
	r := <-done
	if r.err != nil {
		t.Skipf("this machine refuses: %v", r.err)
	}
	if r.attr.Nice() != 10 || r.attr.Idle() {
		t.Errorf("after LowerNiceSlice(0, 10, 300µs): %v, want policy 0 nice 10", r.attr)
	}
	if r.slice == 0 {
		t.Skip("this kernel keeps no custom slice (before Linux 6.12)")
	}
	if r.slice != 300*time.Microsecond {
		t.Errorf("slice %v after LowerNiceSlice(0, 10, 300µs), want 300µs", r.slice)
	}
	if r.after != r.before {
		t.Errorf("slice %v after Restore, want %v, the default it had before", r.after, r.before)
	}
}
