//go:build !linux

package osprio

import "errors"

const supported = false

func threadCPU() int64 { return 0 }

func threadCPUOf(int) int64 { return 0 }

var errUnsupported = errors.New("osprio: per-thread priorities need Linux")

func threadID() int { return 0 }

func yield() {}

func yieldReleasing() {}

func lower(int) error { return errUnsupported }

func current(int) (Attr, error) { return Attr{}, errUnsupported }

func restore(Attr) error { return errUnsupported }

func restoreThread(int, Attr) error { return errUnsupported }

func processCPU() int64 { return 0 }
