//go:build linux

package osprio

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

type cpuSet = unix.CPUSet

// cpu returns the CPU the calling thread runs on (getcpu(2), which needs
// no privilege and cannot block).
func cpu() int {
	var c uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&c)), 0, 0); e != 0 {
		return -1
	}
	return int(c)
}

func readAffinity(set *cpuSet) bool { return unix.SchedGetaffinity(0, set) == nil }

func writeAffinity(set *cpuSet) error { return unix.SchedSetaffinity(0, set) }

func writeAffinityOf(tid int, set *cpuSet) error { return unix.SchedSetaffinity(tid, set) }

func processCPUs() []int {
	var self, main cpuSet
	okSelf := unix.SchedGetaffinity(0, &self) == nil
	okMain := unix.SchedGetaffinity(unix.Getpid(), &main) == nil
	if !okSelf && !okMain {
		return nil
	}
	for i := range self {
		self[i] |= main[i]
	}
	return cpusOf(&self)
}

func cpusOf(set *cpuSet) []int {
	var cpus []int
	for c := 0; len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

func pinThread(tid, cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(tid, &set)
}
