//go:build !linux

package bench

import (
	"fmt"
	"runtime"
)

// openCgroups fails: flag needs Linux cgroups.
func openCgroups(_ float64, flag string) (*cgroupFS, error) {
	return nil, fmt.Errorf("%s needs Linux cgroups (this is %s)", flag, runtime.GOOS)
}
