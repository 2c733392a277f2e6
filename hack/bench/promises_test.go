package main

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestPromisesKept(t *testing.T) {
	kept := []phase{
		{name: "create", writes: 40, requests: map[string]int{"patch statefulsets": 20, "patch services": 20}},
		{name: steadyPhase},
		{name: "scale 1 -> 2", writes: 40, requests: map[string]int{"patch statefulsets": 20}},
	}
	tests := []struct {
		name   string
		change func([]phase)
		broken string // "" when the run keeps its promises
	}{
		{"a run that keeps them", func([]phase) {}, ""},
		{"a conflict", func(ps []phase) { ps[2].conflict = 1 }, "scale 1 -> 2: 1 conflicts (409)"},
		{"a request at rest", func(ps []phase) { ps[1].requests = map[string]int{"get statefulsets": 1} }, "steady: 1 requests while nothing changed"},
		// The positive control: an audit log that misses the operator
		// would show no request at rest and no conflict, proving nothing.
		{"no operator write recorded on create", func(ps []phase) {
			for i := range ps {
				ps[i].writes, ps[i].requests = 0, nil
			}
		}, "the audit log recorded 0 writes of the operator for 20 Memcacheds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := make([]phase, len(kept))
			copy(ps, kept)
			tt.change(ps)
			err := promisesKept(20, ps)
			if tt.broken == "" {
				NewWithT(t).Expect(err).NotTo(HaveOccurred())
				return
			}
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.broken)))
		})
	}
}
