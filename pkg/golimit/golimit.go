// Package golimit says how much of its container's memory the operator
// lets its Go runtime use.
package golimit

// Ratio is the share of the container's memory limit that the operator
// sets as the Go runtime's memory limit (GOMEMLIMIT). The rest is for what
// the Go runtime does not count and the kernel charges to the container
// all the same: the binary's own resident pages, 40 to 45 MiB of the 78 MB
// binary when measured with 10,000 Memcacheds (docs/benchmarks.md). At 90%
// of a 256Mi limit the Go heap alone could fill the container.
const Ratio = 0.75

// Of is the Go memory limit for a container memory limit, in bytes.
func Of(containerLimit int64) int64 {
	return int64(float64(containerLimit) * Ratio)
}
