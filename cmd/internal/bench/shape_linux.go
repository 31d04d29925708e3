//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// threadCPUs returns the CPUs in the calling thread's affinity mask.
func threadCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// cpuSetOf returns the mask of cpus.
func cpuSetOf(cpus []int) unix.CPUSet {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	return set
}

// startOnCPUs calls start, which starts a child process, on an OS thread
// whose affinity mask is cpus for the call, so that the child, forked from
// that thread, inherits the mask (os/exec's Cmd.Run: a child inherits the
// state of a locked thread); then it puts the thread's mask back. The
// runtime starts no thread from a locked one (it hands that to a thread
// of its own), so no other thread takes the mask. With no cpus it only
// calls start. If the mask cannot be put back, the error says so, and the
// thread goes back to the runtime with it: the caller should stop the run.
// The thread is not ended instead, as a thread left locked would be, since
// a child's parent-death signal (childproc.DieWithParent) follows the
// thread that forked it.
func startOnCPUs(cpus []int, start func() error) error {
	if len(cpus) == 0 {
		return start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	set := cpuSetOf(cpus)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("sched_setaffinity(CPU %s): %w", FormatCPUs(cpus), err)
	}
	err := start()
	if rerr := unix.SchedSetaffinity(0, &before); rerr != nil {
		err = errors.Join(err, fmt.Errorf("putting back the starting thread's CPUs: sched_setaffinity: %w", rerr))
	}
	return err
}

// pinProcess sets the affinity mask of every thread of this process to
// cpus, and returns the function that sets it back to the calling
// thread's before the pin. It lists the threads again until a listing
// holds none it has not set: one the runtime started meanwhile from a
// thread not yet set is found by the next listing, and one started from
// a set thread inherits the mask. On failure every thread's mask is put
// back.
func pinProcess(cpus []int) (restore func() error, err error) {
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	restore = func() error {
		if err := setEveryThread(&before); err != nil {
			return fmt.Errorf("putting back bench's CPUs: %w", err)
		}
		return nil
	}
	set := cpuSetOf(cpus)
	if err := setEveryThread(&set); err != nil {
		return nil, errors.Join(fmt.Errorf("moving bench to CPU %s: %w", FormatCPUs(cpus), err), restore())
	}
	return restore, nil
}

// setEveryThread sets the mask of every thread of this process to set
// (pinProcess).
func setEveryThread(set *unix.CPUSet) error {
	seen := map[int]bool{}
	for {
		entries, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := false
		for _, e := range entries {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || seen[tid] {
				continue
			}
			seen[tid], fresh = true, true
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) { // ESRCH: it has exited
				return fmt.Errorf("thread %d: sched_setaffinity: %w", tid, err)
			}
		}
		if !fresh {
			return nil
		}
	}
}

// processCPUs returns the CPUs process pid may run on: its
// Cpus_allowed_list in /proc/PID/status (its main thread's).
func processCPUs(pid int) ([]int, error) {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if list, ok := bytes.CutPrefix(sc.Bytes(), []byte("Cpus_allowed_list:")); ok {
			return parseCPUs(string(list))
		}
	}
	return nil, errors.New("/proc/PID/status has no Cpus_allowed_list")
}
