// Command brokenonce breaks the product once for each entry of entries,
// runs the test the entry names against the broken code, and reports
// whether it failed, as docs/reliability.md's last column says it does:
// those entries are re-done on the code of the day by one command (make
// broken-once), not only recorded when they were first tried. Each break
// is an exact edit of one file, which must be found exactly once; the
// file is restored after its test, whatever happens.
//
// It exits non-zero when a test passed against its break, or a break no
// longer matches the code (the entry is to be written again).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// entry is one break: in File, Old replaced by New, and the test Run (a
// test name) of Pkg, built with Tags, expected to fail. Tags "e2e" is a
// story of the end-to-end suite, run with the real node (Pkg ./e2e).
type entry struct {
	Row, File, Old, New, Pkg, Tags, Run string
}

func main() {
	only := flag.String("run", "", "only the entries whose test name matches this regular expression")
	why := flag.Bool("why", false, "print, under each failure, the last lines the test reported")
	flag.Parse()
	run, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var bad []string
	for _, e := range allEntries() {
		if !run.MatchString(e.Run) {
			continue
		}
		start := time.Now()
		verdict, said, err := try(e)
		if err != nil {
			verdict = "error: " + err.Error()
		}
		fmt.Printf("%-60s %-55s %s (%s)\n", e.Row, e.Run, verdict, time.Since(start).Round(time.Second))
		if *why {
			for _, l := range said {
				fmt.Printf("    %s\n", l)
			}
		}
		if verdict != failedAsRecorded {
			bad = append(bad, e.Run)
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "not failing against their break: %s\n", strings.Join(bad, ", "))
		os.Exit(1)
	}
}

const failedAsRecorded = "fails, as recorded"

// allEntries are the entries of every list.
func allEntries() []entry { return slices.Concat(entries, suiteEntries, storyEntries) }

// try applies e's break, runs its test and restores the file. It returns
// the verdict and, when the test failed, the last lines it reported.
func try(e entry) (string, []string, error) {
	was, err := os.ReadFile(e.File)
	if err != nil {
		return "", nil, err
	}
	if n := strings.Count(string(was), e.Old); n != 1 {
		return fmt.Sprintf("the break matches the code %d times: write the entry again", n), nil, nil
	}
	restore := func() { _ = os.WriteFile(e.File, was, 0o644) }
	defer restore()
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(interrupted)
	go func() {
		if _, ok := <-interrupted; ok {
			restore()
			os.Exit(2)
		}
	}()
	if err := os.WriteFile(e.File, []byte(strings.Replace(string(was), e.Old, e.New, 1)), 0o644); err != nil {
		return "", nil, err
	}
	out, err := testCommand(e).CombinedOutput()
	switch {
	case err == nil:
		return "PASSES against its break", nil, nil
	case strings.Contains(string(out), "--- FAIL: "+e.Run):
		return failedAsRecorded, reported(string(out)), nil
	default:
		// A build failure or a panic elsewhere is not the test failing.
		return "", nil, fmt.Errorf("%s did not run to a failure:\n%s", e.Run, tail(string(out)))
	}
}

// reported is the last lines a failing test reported (t.Log, t.Error and
// their kin write them as file_test.go:line: message, gomega's message on
// the lines after): a failure comes after the logs that led to it.
func reported(out string) []string {
	lines := strings.Split(out, "\n")
	var said []string
	for i := len(lines) - 1; i >= 0 && len(said) < 3; i-- {
		l := lines[i]
		if !testLine.MatchString(l) {
			continue
		}
		one := []string{strings.TrimSpace(l)}
		for _, next := range lines[i+1 : min(i+4, len(lines))] {
			if strings.HasSuffix(strings.TrimSpace(l), ":") && strings.TrimSpace(next) != "" && !testLine.MatchString(next) && !strings.HasPrefix(next, "FAIL") {
				one = append(one, "  "+strings.TrimSpace(next))
			}
		}
		said = append(one, said...)
	}
	return said
}

var testLine = regexp.MustCompile(`^\s+\w+_test\.go:\d+: `)

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}

// testCommand runs e's test: go test, or for an end-to-end story the
// suite's own target, which builds what the break changed (the operator,
// the pods' images) before the story runs on the real node.
func testCommand(e entry) *exec.Cmd {
	if e.Tags == "e2e" {
		return exec.Command("make", "test-e2e", "GO_TEST_FLAGS=-run ^"+e.Run+"$$")
	}
	args := []string{"test", "-count=1", "-run", "^" + e.Run + "$"}
	if e.Tags != "" {
		args = append(args, "-tags", e.Tags)
	}
	return exec.Command("go", append(args, e.Pkg)...)
}
