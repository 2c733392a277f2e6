//go:build tools

// Package tools pins the programs make vulncheck builds from this module.
package tools

import (
	_ "golang.org/x/vuln/cmd/govulncheck"
	_ "golang.org/x/vulndb/cmd/indexdb"
)
