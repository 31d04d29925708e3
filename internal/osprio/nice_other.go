//go:build !linux

package osprio

import "time"

func lowerNice(int, int) error { return errUnsupported }

func lowerNiceSlice(int, int, time.Duration) error { return errUnsupported }

func threadSlice(int) (time.Duration, error) { return 0, errUnsupported }
