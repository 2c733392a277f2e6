// Package podlog is what the pod-side processes tell the operator in their
// logs, and how the operator reads it: the warm runner's word on a
// memcached start (Start), the key mover's on each step of a move (Step),
// and the termination message a failed container leaves (Terminate). Each
// report is one type, written as one JSON line by a slog.JSONHandler and
// read back by Lines: its keys are named once, in its struct tags.
package podlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"iter"
	"log/slog"
	"maps"
	"slices"
)

// Write logs r, a report of this package, at level: its message is r's
// "msg", its attributes r's other fields as their tags name them.
func Write(log *slog.Logger, level slog.Level, r any) {
	msg, attrs := attrsOf(r)
	log.Log(context.Background(), level, msg, attrs...)
}

// attrsOf is r's "msg" and its other fields, as slog attributes in the
// order of their names.
func attrsOf(r any) (string, []any) {
	raw, err := json.Marshal(r)
	if err != nil {
		panic(err) // the reports hold strings and numbers only
	}
	fields := map[string]any{}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&fields); err != nil {
		panic(err)
	}
	msg, _ := fields["msg"].(string)
	var attrs []any
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if k != "msg" {
			attrs = append(attrs, slog.Any(k, fields[k]))
		}
	}
	return msg, attrs
}

// ReadLimit is how much of a container's log the operator reads for a
// report, and the longest line it reads.
const ReadLimit = 1 << 20

// Lines are the lines of log that are reports of type T (JSON objects;
// memcached's own lines are not), in order. A line longer than ReadLimit
// ends the reading.
func Lines[T any](log []byte) iter.Seq[T] {
	return func(yield func(T) bool) {
		sc := bufio.NewScanner(bytes.NewReader(log))
		sc.Buffer(make([]byte, 0, 64<<10), ReadLimit)
		for sc.Scan() {
			var r T
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue
			}
			if !yield(r) {
				return
			}
		}
	}
}
