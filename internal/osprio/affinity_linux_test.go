//go:build linux

package osprio

import (
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPinThread pins a locked thread to one CPU of its mask by its tid, as
// a hand-off pins another thread, and puts the mask back by its tid.
func TestPinThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before Affinity
	if !before.ReadAffinity() {
		t.Fatal("ReadAffinity failed")
	}
	cpu := -1
	for c := range 1024 {
		if before.set.IsSet(c) {
			cpu = c // the last CPU of the mask: likely not the current one
		}
	}
	if err := PinThread(ThreadID(), cpu); err != nil {
		t.Fatal(err)
	}
	var pinned unix.CPUSet
	if err := unix.SchedGetaffinity(0, &pinned); err != nil {
		t.Fatal(err)
	}
	if pinned.Count() != 1 || !pinned.IsSet(cpu) {
		t.Fatalf("after PinThread(self, %d) the mask has %d CPUs", cpu, pinned.Count())
	}
	runtime.Gosched() // a locked thread: the kernel moves it at its next switch at the latest
	for range 1000 {
		if CPU() == cpu {
			break
		}
		runtime.Gosched()
	}
	if got := CPU(); got != cpu {
		t.Errorf("CPU() = %d on a thread pinned to CPU %d", got, cpu)
	}
	if err := before.SetThread(ThreadID()); err != nil {
		t.Fatal(err)
	}
	var after Affinity
	after.ReadAffinity()
	if after.set != before.set {
		t.Errorf("Restore: mask of %d CPUs, want the %d before", after.set.Count(), before.set.Count())
	}
}

// TestCPUs lists the CPUs of the calling thread's mask.
func TestCPUs(t *testing.T) {
	var a Affinity
	if !a.ReadAffinity() {
		t.Fatal("ReadAffinity failed")
	}
	cpus := a.CPUs()
	if len(cpus) != a.set.Count() {
		t.Fatalf("CPUs() = %v for a mask of %d CPUs", cpus, a.set.Count())
	}
	for i, c := range cpus {
		if !a.set.IsSet(c) || i > 0 && c <= cpus[i-1] {
			t.Fatalf("CPUs() = %v: not the mask's CPUs in order", cpus)
		}
	}
}

// TestProcessCPUsThroughAPin: a thread pinned to one CPU still reads the
// process's CPUs, its own mask with the main thread's.
func TestProcessCPUsThroughAPin(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before Affinity
	if !before.ReadAffinity() {
		t.Fatal("ReadAffinity failed")
	}
	want := before.CPUs()
	if got := ProcessCPUs(); !slices.Equal(got, want) {
		t.Fatalf("ProcessCPUs() = %v, want the mask's %v", got, want)
	}
	if ThreadID() == unix.Getpid() || len(want) < 2 {
		t.Skip("the test runs on the main thread, or on one CPU: a pin would change nothing to see")
	}
	if err := PinThread(0, want[len(want)-1]); err != nil {
		t.Fatal(err)
	}
	defer before.Restore()
	if got := ProcessCPUs(); !slices.Equal(got, want) {
		t.Errorf("pinned: ProcessCPUs() = %v, want %v", got, want)
	}
}
