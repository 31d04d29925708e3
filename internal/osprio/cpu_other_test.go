//go:build !linux

package osprio

import "testing"

// TestThreadCPUUnsupported: where no thread CPU clock can be read,
// ThreadCPU and ThreadCPUOf read 0, which cpusched takes as no reading.
func TestThreadCPUUnsupported(t *testing.T) {
	if Supported() {
		t.Fatal("Supported() = true on a platform without per-thread clocks")
	}
	if got := ThreadCPU(); got != 0 {
		t.Errorf("ThreadCPU() = %d, want 0", got)
	}
	if got := ThreadCPUOf(ThreadID()); got != 0 {
		t.Errorf("ThreadCPUOf(ThreadID()) = %d, want 0", got)
	}
	if got := ProcessCPU(); got != 0 {
		t.Errorf("ProcessCPU() = %d, want 0", got)
	}
}
