package osprio

import (
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestParsePolicy(t *testing.T) {
	for _, p := range all {
		got, err := ParsePolicy(p.Name)
		if err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %v, %v, want %v", p.Name, got, err, p)
		}
	}
	if _, err := ParsePolicy("fast"); err == nil {
		t.Error("ParsePolicy(fast): got nil error, want one listing the valid names")
	}
}

// TestLowerOnLockedThread lowers a throwaway thread: the goroutine exits
// locked, so the runtime discards the thread and the test process keeps
// its priority.
func TestLowerOnLockedThread(t *testing.T) {
	if !Supported() {
		if err := Lower(Idle); err == nil {
			t.Error("Lower on an unsupported platform: got nil error")
		}
		t.Skip("no per-thread priorities here")
	}
	for _, p := range all {
		errc := make(chan error)
		go func() {
			runtime.LockOSThread()
			errc <- Lower(p)
		}()
		if err := <-errc; err != nil {
			t.Errorf("Lower(%s) = %v", p.Name, err)
		}
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestThreadCPUCountsThisThreadOnly: on a locked thread, ThreadCPU grows by
// about the CPU the thread used, and not while it sleeps.
func TestThreadCPUCountsThisThreadOnly(t *testing.T) {
	if !Supported() {
		t.Skip("no per-thread CPU clock here")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := ThreadCPU()
	for deadline := time.Now().Add(10 * time.Second); ThreadCPU()-c0 < int64(5*time.Millisecond); {
		if time.Now().After(deadline) {
			t.Fatalf("10 s of spinning counted %v of thread CPU, want 5ms", time.Duration(ThreadCPU()-c0))
		}
	}
	c1 := ThreadCPU()
	time.Sleep(20 * time.Millisecond)
	slept := ThreadCPU() - c1
	if slept > int64(5*time.Millisecond) {
		t.Errorf("20 ms of sleeping counted %v of thread CPU, want under 5ms", time.Duration(slept))
	}
}
