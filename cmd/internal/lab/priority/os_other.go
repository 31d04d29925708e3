//go:build !linux

package priority

import (
	"errors"
	"time"
)

// osSupported is "" where the OS rows can run, or why not.
const osSupported = "not Linux"

var errNotLinux = errors.New("not Linux")

var realCalls = osCalls{
	setNice:   func(tid, nice int) error { return errNotLinux },
	setPolicy: func(tid int, policy, priority uint32) error { return errNotLinux },
}

func gettid() int              { return 0 }
func pinProcess(cpu int) error { return errNotLinux }
func threadCPU() time.Duration { return 0 }
func sleep1ms()                { time.Sleep(time.Millisecond) }
