package osprio

import (
	"encoding/binary"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLowerNiceSlice: LowerNice with a slice leaves the thread at its
// policy, at the nice value, with that slice, where the kernel has
// per-thread slices.
func TestLowerNiceSlice(t *testing.T) {
	base := BaseSlice()
	if base <= 0 {
		t.Skip("this kernel reports no time slice (before Linux 6.12)")
	}
	type result struct {
		attr unix.SchedAttr
		err  error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the runtime discards the lowered thread
		if err := LowerNice(0, 10, 2*base); err != nil {
			res <- result{err: err}
			return
		}
		attr, err := getAttr(0)
		res <- result{attr, err}
	}()
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.attr.Policy != unix.SCHED_NORMAL || r.attr.Nice != 10 || time.Duration(r.attr.Runtime) != 2*base {
		t.Errorf("after LowerNice(0, 10, %v): policy %d nice %d slice %v, want policy 0 nice 10 slice %v",
			2*base, r.attr.Policy, r.attr.Nice, time.Duration(r.attr.Runtime), 2*base)
	}
}

// BenchmarkWakeBesideTurns measures how late a thread woken every
// millisecond gets its CPU while two nice-10 threads take turns on it
// (each computes 2 ms, then wakes the other and waits: the kernel picks a
// thread afresh every 2 ms, as it picks hand-off threads at slot
// hand-offs). The sleeper is pinned to CPU 0 with the two, the waker to
// CPU 1; late-frac is the fraction of wakes that waited over 0.5 ms, and
// p99-us the wait's 99th percentile. kernel-slice gives the two the
// kernel's slice, twice-slice twice it (unraisableSlice in the cpusched
// package), sched-idle makes them SCHED_IDLE instead. Needs 2 CPUs; run it
// with -benchtime 4000x on a quiet machine.
func BenchmarkWakeBesideTurns(b *testing.B) {
	if !Supported() {
		b.Skip("no per-thread priorities on this platform")
	}
	if cpus := ProcessCPUs(); len(cpus) < 2 || !slices.Contains(cpus, 0) || !slices.Contains(cpus, 1) {
		b.Skip("needs CPUs 0 and 1")
	}
	base := BaseSlice()
	for _, c := range []struct {
		name  string
		lower func() error
	}{
		{"kernel-slice", func() error { return LowerNice(0, 10, 0) }},
		{"twice-slice", func() error { return LowerNice(0, 10, 2*base) }},
		{"sched-idle", Lower},
	} {
		b.Run(c.name, func(b *testing.B) { benchWake(b, c.lower) })
	}
}

func benchWake(b *testing.B, lower func() error) {
	pin := func(cpu int) {
		if err := PinThread(0, cpu); err != nil {
			b.Error(err)
		}
	}
	// pinLocked locks the calling goroutine to its thread and pins the
	// thread to cpu; the returned func puts its affinity back and unlocks.
	pinLocked := func(cpu int) (restore func()) {
		runtime.LockOSThread()
		var mask Affinity
		mask.ReadAffinity()
		pin(cpu)
		return func() {
			mask.Restore()
			runtime.UnlockOSThread()
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(done)
	turn := [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}
	for i := range 2 {
		wg.Go(func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			pin(0)
			if err := lower(); err != nil {
				b.Error(err)
			}
			for {
				select {
				case <-turn[i]:
				case <-done:
					return
				}
				for end := time.Now().Add(2 * time.Millisecond); time.Now().Before(end); {
				}
				turn[1-i] <- struct{}{}
			}
		})
	}
	turn[0] <- struct{}{}
	var fds [2]int
	if err := unix.Pipe(fds[:]); err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	wg.Go(func() {
		defer pinLocked(1)()
		var msg [8]byte
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			binary.NativeEndian.PutUint64(msg[:], uint64(time.Now().UnixNano()))
			unix.Write(fds[1], msg[:])
		}
	})
	defer pinLocked(0)()
	waits := make([]time.Duration, 0, b.N)
	var msg [8]byte
	b.ResetTimer()
	for range b.N {
		if _, err := unix.Read(fds[0], msg[:]); err != nil {
			b.Fatal(err)
		}
		waits = append(waits, time.Duration(time.Now().UnixNano()-int64(binary.NativeEndian.Uint64(msg[:]))))
	}
	b.StopTimer()
	slices.Sort(waits)
	late := 0
	for _, w := range waits {
		if w > 500*time.Microsecond {
			late++
		}
	}
	b.ReportMetric(float64(late)/float64(len(waits)), "late-frac")
	b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds()), "p99-us")
}

// TestBaseSliceOnALongSliceThread: BaseSlice called on a lowered thread
// given a longer slice does not read that slice: it reads the main
// thread's, the kernel's own, or 0 where the main thread is lowered too
// (another test's locked goroutine may have lowered it).
func TestBaseSliceOnALongSliceThread(t *testing.T) {
	base := BaseSlice()
	if base <= 0 {
		t.Skip("this kernel reports no time slice (before Linux 6.12)")
	}
	got := make(chan time.Duration, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the runtime discards the lowered thread
		if err := LowerNice(0, 10, 4*base); err != nil {
			t.Error(err)
		}
		got <- BaseSlice()
	}()
	if d := <-got; d != base && d != 0 {
		t.Errorf("BaseSlice on a thread at nice 10 with a %v slice: %v, want the kernel's %v or 0", 4*base, d, base)
	}
}

// TestSetProcessSlice: the process's threads at the kernel's slice take
// the new one and go back; a thread with a slice of its own keeps it.
func TestSetProcessSlice(t *testing.T) {
	base := BaseSlice()
	if base <= 0 {
		t.Skip("this kernel reports no time slice (before Linux 6.12)")
	}
	const short = 100 * time.Microsecond
	// A plain thread: the test's own.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	plain := unix.Gettid()
	// A thread with a slice of its own (lowered: the runtime discards it).
	owns := make(chan int, 1)
	release := make(chan struct{})
	defer close(release)
	go func() {
		runtime.LockOSThread()
		if err := LowerNice(0, 5, 4*base); err != nil {
			t.Error(err)
		}
		owns <- unix.Gettid()
		<-release
	}()
	own := <-owns
	slice := func(tid int) time.Duration {
		t.Helper()
		attr, err := getAttr(tid)
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(attr.Runtime)
	}
	if n := SetProcessSlice(base, short); n < 1 {
		t.Fatalf("SetProcessSlice(%v, %v) set %d threads, want at least the plain one", base, short, n)
	}
	if got := slice(plain); got != short {
		t.Errorf("the plain thread's slice: got %v, want %v", got, short)
	}
	if attr, _ := getAttr(plain); attr.Flags&unix.SCHED_FLAG_RESET_ON_FORK == 0 {
		t.Errorf("the plain thread's flags %#x: want SCHED_FLAG_RESET_ON_FORK, so that a child does not keep the slice", attr.Flags)
	}
	if got := slice(own); got != 4*base {
		t.Errorf("the thread with its own slice: got %v, want %v kept", got, 4*base)
	}
	SetProcessSlice(short, 0)
	if got := slice(plain); got != base {
		t.Errorf("after SetProcessSlice(%v, 0): got %v, want the kernel's %v back", short, got, base)
	}
	if attr, _ := getAttr(plain); attr.Flags&unix.SCHED_FLAG_RESET_ON_FORK != 0 {
		t.Errorf("after SetProcessSlice(%v, 0): flags %#x, want SCHED_FLAG_RESET_ON_FORK cleared", short, attr.Flags)
	}
	if got := slice(own); got != 4*base {
		t.Errorf("after SetProcessSlice(%v, 0), the thread with its own slice: got %v, want %v", short, got, 4*base)
	}
	if n := SetProcessSlice(0, short); n != 0 {
		t.Errorf("SetProcessSlice(0, %v) set %d threads, want none", short, n)
	}
}
