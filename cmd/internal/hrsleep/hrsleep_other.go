//go:build !linux

package hrsleep

import "time"

func preciseSleep(d time.Duration) { time.Sleep(d) }
