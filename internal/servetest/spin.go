package servetest

import (
	"time"

	"github.com/cpusched/cpusched/internal/schedtest"
)

// Spin computes for about d of CPU time, without a Checkpoint: a heavy
// route's handler, for the tests of the Auto wrappers (schedtest.Spin).
func Spin(d time.Duration) { schedtest.Spin(d) }
