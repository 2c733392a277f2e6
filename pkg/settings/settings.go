// Package settings is memcached's settings as they pass from the operator
// to a pod's warm runner: the operator writes them on the pod
// (desired.AnnotationMemcachedSettings, one flag per line), the runner
// reads them through the downward API and adds them, last, to memcached's
// command line. A pod's annotations are written by whoever can patch the
// pod, and a flag given last overrides the same flag before it (TLS
// verification, a UDP port): so the runner takes only the flags the
// operator writes, each within the bounds the CRD gives its field.
package settings

import (
	"fmt"
	"strconv"
	"strings"
)

// Flags of memcached that the settings may carry.
const (
	MemoryLimit = "--memory-limit="
	ConnLimit   = "--conn-limit="
	Threads     = "--threads="
	MaxItemSize = "--max-item-size="
)

// bound is the values a flag may take: from min to max, a multiple of
// step.
type bound struct{ min, max, step int64 }

// bounds are the CRD's for the fields the flags come from
// (api/v1alpha1: memoryLimitMiB, maxConnections, threads, maxItemSize).
var bounds = map[string]bound{
	MemoryLimit: {8, 65536, 1},
	ConnLimit:   {16, 65536, 1},
	Threads:     {1, 64, 1},
	MaxItemSize: {512 << 10, 1 << 30, 512 << 10},
}

// verbosities are the verbosity flags (spec.verbosity 1 and 2).
var verbosities = []string{"-v", "-vv"}

// Format is flags as the annotation holds them.
func Format(flags []string) string { return strings.Join(flags, "\n") }

// Parse reads the flags of an annotation, one per line. What is not a flag
// the operator writes, within its bounds, is left out and named in the
// error: the flags returned are the ones taken.
func Parse(annotation string) ([]string, error) {
	flags := []string{}
	var refused []string
	for line := range strings.Lines(annotation) {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case allowed(line):
			flags = append(flags, line)
		default:
			refused = append(refused, strconv.Quote(line))
		}
	}
	if len(refused) > 0 {
		return flags, fmt.Errorf("settings the operator does not write are left out: %s", strings.Join(refused, ", "))
	}
	return flags, nil
}

func allowed(flag string) bool {
	for _, v := range verbosities {
		if flag == v {
			return true
		}
	}
	name, value, ok := strings.Cut(flag, "=")
	if !ok {
		return false
	}
	b, ok := bounds[name+"="]
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(value, 10, 64)
	return err == nil && strconv.FormatInt(n, 10) == value && n >= b.min && n <= b.max && n%b.step == 0
}
