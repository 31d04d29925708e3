//go:build !linux

package osprio

import "errors"

const supported = false

func lower(Policy) error { return errors.New("osprio: per-thread priorities need Linux") }

func threadCPU() int64 { return 0 }
