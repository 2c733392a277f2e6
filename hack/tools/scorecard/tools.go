//go:build tools

// Package tools pins operator-sdk and the scorecard's test program
// (make scorecard).
package tools

import (
	_ "github.com/operator-framework/operator-sdk/cmd/operator-sdk"
	_ "github.com/operator-framework/operator-sdk/images/scorecard-test"
)
