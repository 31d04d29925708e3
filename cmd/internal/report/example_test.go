package report_test

import (
	"os"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

func ExampleTable() {
	t := report.NewTable("policy", "p99 ms", "CPU")
	t.Row("fifo", report.Ms(152.4), report.Pct(99.6))
	t.Row("eevdf", report.Ms(1.5), report.Pct(87.25))
	t.Row("idle", report.Ms(0.01234), report.Pct(0.5))
	_ = t.Write(os.Stdout)
	// Output:
	// policy  p99 ms   CPU
	// ------  ------  ----
	// fifo       152  100%
	// eevdf     1.50   87%
	// idle    0.0123  0.5%
}
