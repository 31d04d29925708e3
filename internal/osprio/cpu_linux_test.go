package osprio

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestThreadCPUOfAGoneThread: the id of a thread that has ended reads 0.
func TestThreadCPUOfAGoneThread(t *testing.T) {
	// A goroutine that exits locked ends its thread, but for the main
	// thread, which the runtime cannot end: one that lands there holds it
	// until the test ends, so that the next runs elsewhere.
	hold := make(chan struct{})
	defer close(hold)
	tid := os.Getpid()
	for range 3 {
		tids := make(chan int)
		go func() {
			runtime.LockOSThread()
			tids <- ThreadID()
			if ThreadID() == os.Getpid() {
				<-hold
				runtime.UnlockOSThread()
			}
		}()
		if tid = <-tids; tid != os.Getpid() {
			break
		}
	}
	if tid == os.Getpid() {
		t.Skip("the goroutines ran on the main thread, which does not end")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d has not ended 10s after its goroutine exited locked", tid)
		}
	}
	if got := ThreadCPUOf(tid); got != 0 {
		t.Errorf("ThreadCPUOf(%d), a thread that has ended, = %d, want 0", tid, got)
	}
}
