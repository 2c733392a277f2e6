package codesize

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/memcached-operator/internal/testsupport/repo"
)

// Bounds a file and a function of pkg/, cmd/ and hack/ keep to
// (docs/architecture.md).
const (
	maxFileLines     = 300
	maxFunctionLines = 60
)

// Every file of pkg/, cmd/ and hack/ reads in one sitting, and every
// function on one screen, tables aside.
func TestTheCodeReadsInSmallPieces(t *testing.T) {
	pieces, err := Measure(repo.Path("pkg"), repo.Path("cmd"), repo.Path("hack"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pieces) < 100 {
		t.Fatalf("measured %d files and functions: not the repository", len(pieces))
	}
	for _, p := range pieces {
		switch {
		case p.Function == "" && p.Lines > maxFileLines:
			t.Errorf("%s has %d lines (at most %d)", p.Path, p.Lines, maxFileLines)
		case p.Function != "" && p.Lines > maxFunctionLines:
			t.Errorf("%s: %s has %d lines, tables aside (at most %d)", p.Path, p.Function, p.Lines, maxFunctionLines)
		}
	}
}

// A table does not count against its function; the code around it does.
func TestATableIsNotCountedAsCode(t *testing.T) {
	table := "var cases = []struct{ a, b int }{\n"
	for i := range 100 {
		table += fmt.Sprintf("\t{%d, %d},\n", i, i)
	}
	table += "}\n"
	dir := t.TempDir()
	write(t, dir, "table.go", "package x\n\nfunc f() {\n\t"+table+"\t_ = cases\n}\n")
	write(t, dir, "long.go", "package x\n\nfunc g() {\n"+repeat("\t_ = 1\n", 61)+"}\n")
	pieces, err := Measure(dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]int{}
	for _, p := range pieces {
		lines[p.Function] = p.Lines
	}
	if lines["f"] > 10 || lines["g"] != 63 {
		t.Errorf("f (a table) counted %d lines, g (code) %d: want at most 10 and 63", lines["f"], lines["g"])
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func repeat(s string, n int) string { return strings.Repeat(s, n) }
