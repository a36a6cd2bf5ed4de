// Package family names the metric families the server exports that code
// outside package metrics reads: the operators' stream (http), the
// console's reading of /metrics (web renders these names into the page),
// and the load bench. Package metrics registers its families under these
// names, so each is spelled once; its tests check the registry exports
// every name in All.
//
// It imports nothing, as package api holds the HTTP contract: a reader
// depends on the names, not on the registry (adapters never import each
// other).
package family

// Namespace prefixes every family the service defines.
const Namespace = "flashsale"

// The families read outside package metrics. A histogram's name is its
// family's; the text exposition adds _bucket, _sum and _count.
const (
	// Purchases counts purchases answered, labelled sale and outcome.
	Purchases = Namespace + "_purchases_total"
	// FunnelSteps counts purchases past each funnel step, labelled sale
	// and step.
	FunnelSteps = Namespace + "_funnel_steps_total"
	// RequestDuration is the HTTP latency histogram, labelled route.
	RequestDuration = Namespace + "_http_request_duration_seconds"
	// DBCalls counts database calls, labelled op and outcome.
	DBCalls = Namespace + "_db_calls_total"
	// DBOrdersPlaced counts reservations the conditional insert was
	// asked to place, labelled result.
	DBOrdersPlaced = Namespace + "_db_orders_placed_total"
	// Selling is 1 for what this instance sells from, labelled from.
	Selling = Namespace + "_selling"
	// ProcessStart is client_golang's process collector's start time: it
	// tells one instance (or one run of it) from another.
	ProcessStart = "process_start_time_seconds"
)

// TestSale is the sale label every load test's sale counts under (its ID
// is never a label: /metrics may be public).
const TestSale = "test"

// All is every name above, for the test that the registry exports them.
var All = []string{Purchases, FunnelSteps, RequestDuration, DBCalls, DBOrdersPlaced, Selling, ProcessStart}
