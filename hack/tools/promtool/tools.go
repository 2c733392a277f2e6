//go:build tools

// Package tools pins promtool (make check-rules).
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
