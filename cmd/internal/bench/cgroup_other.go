//go:build !linux

package bench

import (
	"fmt"
	"runtime"
)

// openCPUQuota fails: a CPU quota needs Linux cgroups.
func openCPUQuota(float64) (*cgroupFS, error) {
	return nil, fmt.Errorf("%w: -cpu-quota needs Linux cgroups (this is %s)", ErrCPUQuota, runtime.GOOS)
}
