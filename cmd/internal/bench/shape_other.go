//go:build !linux

package bench

import (
	"fmt"
	"runtime"
)

// errNoAffinity is the error of every call that needs affinity masks.
var errNoAffinity = fmt.Errorf("needs Linux's sched_setaffinity (this is %s)", runtime.GOOS)

func threadCPUs() ([]int, error) { return nil, errNoAffinity }

// startOnCPUs calls start; CPUs cannot be given here.
func startOnCPUs(cpus []int, start func() error) error {
	if len(cpus) > 0 {
		return errNoAffinity
	}
	return start()
}

func pinProcess([]int) (func() error, error) { return nil, errNoAffinity }

func processCPUs(int) ([]int, error) { return nil, errNoAffinity }
