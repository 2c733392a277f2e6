//go:build tools

// Package tools pins the mutation tester (make mutation).
package tools

import _ "github.com/go-gremlins/gremlins/cmd/gremlins"
