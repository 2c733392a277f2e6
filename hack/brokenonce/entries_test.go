package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every entry still breaks the code of the day: its edit is found exactly
// once in its file, and the test it names is a test of its package. Checked
// in make test, so that a change that moves the code an entry breaks says
// so at once, not at the next make broken-once.
func TestEveryEntryStillMatchesTheCode(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, e := range allEntries() {
		was, err := os.ReadFile(filepath.Join(root, e.File))
		if err != nil {
			t.Errorf("%s: %v", e.Row, err)
			continue
		}
		if n := strings.Count(string(was), e.Old); n != 1 {
			t.Errorf("%s: the break matches %s %d times, want once", e.Row, e.File, n)
		}
		if e.Old == e.New {
			t.Errorf("%s: the break changes nothing", e.Row)
		}
		// A test built only with a tag the entry does not give would not
		// run, and go test passes with no test run.
		switch tag, found := testIn(t, filepath.Join(root, e.Pkg), e.Run); {
		case !found:
			t.Errorf("%s: no test %s in %s", e.Row, e.Run, e.Pkg)
		case tag != "" && tag != e.Tags:
			t.Errorf("%s: %s is built with the tag %q, the entry gives %q", e.Row, e.Run, tag, e.Tags)
		}
	}
}

// testIn reports whether a test file of the package in dir declares the
// test named run, and the build tag that file needs, if any.
func testIn(t *testing.T, dir, run string) (tag string, found bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	declared := regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(run) + `\(t \*testing\.T\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if declared.Match(b) {
			if m := buildTag.FindSubmatch(b); m != nil {
				return string(m[1]), true
			}
			return "", true
		}
	}
	return "", false
}

var buildTag = regexp.MustCompile(`(?m)^//go:build (\w+)$`)
