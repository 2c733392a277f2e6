package main

import "go.uber.org/zap/zapcore"

// lazyFields defers the encoding of a logger's fields until it writes an
// entry. zap encodes the fields of each With at once, whatever the level;
// controller-runtime adds fields for every reconcile (controller, object,
// reconcileID) and the controller its own, so with error-level logging an
// operator spent much of its allocations encoding fields that no entry
// ever used (docs/benchmarks.md has the profile).
type lazyFields struct{ zapcore.Core }

func (c lazyFields) With(fields []zapcore.Field) zapcore.Core {
	return lazyFields{zapcore.NewLazyWith(c.Core, fields)}
}
