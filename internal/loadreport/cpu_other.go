//go:build !unix

package loadreport

import "time"

// processCPU reports that the process's CPU time is not read here:
// cpu_utilization is then left out of the reports.
func processCPU() (time.Duration, bool) { return 0, false }
