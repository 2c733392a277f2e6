// Package autoscale decides the size of a Memcached from its memcached's
// own statistics: the evictions of items still being read, the hit ratio
// and the working set. The pods' discovery containers serve the
// statistics (Signals, on SignalsPort); the operator reads them, keeps
// them in a History per Memcached, and takes a step when Decide says so.
package autoscale

import (
	"fmt"
	"strconv"
)

// SignalsPort is the port the discovery container serves a pod's Signals
// on (HTTP, GET SignalsPath), named SignalsPortName.
const (
	SignalsPort     int32 = 11213
	SignalsPortName       = "signals"
	SignalsPath           = "/signals"
	// WorkingSetParam is the query parameter naming, in seconds, how far
	// back the working set counts the items read or written.
	WorkingSetParam = "workingSetSeconds"
)

// Signals are one memcached's counters as its pod's discovery container
// serves them: memcached's own (its "stats"), and the bytes of the items
// read or written in the last WorkingSetSeconds (from its lru_crawler
// metadump), -1 when not counted.
type Signals struct {
	// Time is memcached's clock, in Unix seconds.
	Time             int64  `json:"time"`
	Uptime           int64  `json:"uptime"`
	GetHits          uint64 `json:"getHits"`
	GetMisses        uint64 `json:"getMisses"`
	Evictions        uint64 `json:"evictions"`
	EvictedUnfetched uint64 `json:"evictedUnfetched"`
	Bytes            int64  `json:"bytes"`
	LimitMaxbytes    int64  `json:"limitMaxbytes"`
	WorkingSetBytes  int64  `json:"workingSetBytes"`
	// WorkingSetSeconds is the time the working set was counted over, and
	// WorkingSetTime when (memcached's clock).
	WorkingSetSeconds int64 `json:"workingSetSeconds"`
	WorkingSetTime    int64 `json:"workingSetTime"`
	// Reuse is the gets by reuse distance over the working set's window,
	// from a sample of the keys memcached logs the gets of; nil until the
	// pod has followed its gets for a while (it starts when first asked).
	Reuse *Reuse `json:"reuse,omitempty"`
}

// FromStats takes the counters of memcached's "stats" answer.
func FromStats(stats map[string]string) (Signals, error) {
	var s Signals
	var err error
	ints := []struct {
		name string
		to   *int64
	}{{"time", &s.Time}, {"uptime", &s.Uptime}, {"bytes", &s.Bytes}, {"limit_maxbytes", &s.LimitMaxbytes}}
	for _, f := range ints {
		if *f.to, err = strconv.ParseInt(stats[f.name], 10, 64); err != nil {
			return Signals{}, fmt.Errorf("memcached's stats: %s: %w", f.name, err)
		}
	}
	uints := []struct {
		name string
		to   *uint64
	}{{"get_hits", &s.GetHits}, {"get_misses", &s.GetMisses}, {"evictions", &s.Evictions}, {"evicted_unfetched", &s.EvictedUnfetched}}
	for _, f := range uints {
		if *f.to, err = strconv.ParseUint(stats[f.name], 10, 64); err != nil {
			return Signals{}, fmt.Errorf("memcached's stats: %s: %w", f.name, err)
		}
	}
	s.WorkingSetBytes = -1
	return s, nil
}

// readEvictions are the evictions of items that had been read.
func (s Signals) readEvictions() uint64 {
	if s.EvictedUnfetched > s.Evictions {
		return 0
	}
	return s.Evictions - s.EvictedUnfetched
}
