package osprio

import (
	"fmt"

	"golang.org/x/sys/unix"
)

func lowerNice(tid, n int) error {
	if tid == 0 {
		tid = unix.Gettid()
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, tid, n); err != nil {
		return fmt.Errorf("osprio: setpriority(%d): %w", n, err)
	}
	return nil
}
