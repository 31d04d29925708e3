//go:build !linux

package osprio

import "time"

func lowerNice(int, int, time.Duration) error { return errUnsupported }

func baseSlice() time.Duration { return 0 }

func setProcessSlice(time.Duration, time.Duration) int { return 0 }
