package httpsched

// The endpoint-load-metrics header of WithLoadMetricsHeader, in the text
// form of Envoy's ORCA parser.
//
// The grammar is that of source/common/orca/orca_parser.cc in Envoy v1.33
// and later, the parser as envoyproxy/envoy#37724 left it (merged December
// 2024: the key/value delimiter became '=', as the ORCA design document
// has it; Envoy v1.32.0 split on ':'). The header's value is "TEXT "
// followed by a list that HeaderUtility::parseCommaDelimitedHeader splits
// on ',' (each item stripped of spaces, empty items skipped), each item
// split at its first '=' into a name and a value, neither empty. The value
// must parse as a double (absl::SimpleAtod) that is neither NaN nor
// infinite; the name must be one of cpu_utilization, mem_utilization,
// application_utilization, eps and rps_fractional, or named_metrics.
// followed by a non-empty key, and no name may appear twice. Anything else
// makes Envoy drop the whole report.
//
// So the formatter writes "name=value" with no space around '=', values in
// plain decimal notation (strconv's 'f' format: digits, a point, digits),
// and leaves out a value that is negative (ORCA's fields are >= 0), NaN or
// infinite, rather than send a report Envoy would refuse. Go's net/http
// sends the header name in its canonical form, which HTTP/2 lowercases;
// Envoy matches it case-insensitively either way.

import (
	"math"
	"strconv"

	"github.com/cpusched/cpusched/internal/loadreport"
)

// loadMetricsHeader is the header WithLoadMetricsHeader adds.
const loadMetricsHeader = "Endpoint-Load-Metrics"

// formatLoadMetrics returns r as the value of the endpoint-load-metrics
// header.
func formatLoadMetrics(r loadreport.Report) string {
	b := make([]byte, 0, 160)
	b = append(b, "TEXT "...)
	n := 0
	add := func(name string, v float64) {
		if !(v >= 0) || math.IsInf(v, 1) { // NaN fails v >= 0
			return
		}
		if n++; n > 1 {
			b = append(b, ", "...)
		}
		b = append(b, name...)
		b = append(b, '=')
		b = strconv.AppendFloat(b, math.Abs(v), 'f', -1, 64) // -0 as 0
	}
	add("application_utilization", r.Application)
	add("cpu_utilization", r.CPU)
	add("rps_fractional", r.QPS)
	add("eps", r.EPS)
	add("named_metrics."+loadreport.QueueWaitP99Metric, loadreport.Millis(r.QueueWaitP99))
	return string(b)
}
