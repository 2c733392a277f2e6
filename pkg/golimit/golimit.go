// Package golimit says how much of its container's memory the operator
// lets its Go runtime use.
package golimit

// Ratio is the share of the container's memory limit that the operator
// sets as the Go runtime's memory limit (GOMEMLIMIT). The rest is for what
// the Go runtime does not count and the kernel charges to the container
// all the same: the binary's own resident pages, which at 90% of the
// manifests' limit left the Go heap room to fill the container
// (docs/benchmarks.md has the measurements).
const Ratio = 0.75

// Of is the Go memory limit for a container memory limit, in bytes.
func Of(containerLimit int64) int64 {
	return int64(float64(containerLimit) * Ratio)
}
