// Command vulncheck runs govulncheck over the operator's programs against a
// vulnerability database on disk, and fails on any known vulnerability
// their code reaches (a call path to the vulnerable symbol, govulncheck's
// "symbol" level) that the file of accepted findings does not list with a
// reason. An accepted finding that is no longer found fails too, so that
// the file says only what is true.
//
//	go run ./hack/vulncheck -govulncheck bin/govulncheck -db bin/vulndb \
//	    -accepted hack/vuln-accepted.txt ./cmd/...
//
// With -binary, the arguments are built programs instead (govulncheck's
// binary mode): what ships, built with the toolchain that built it, is
// what is scanned; the findings of all of them are taken together.
//
// The accepted file has one finding per line, "GO-YYYY-NNNN reason"; empty
// lines and lines starting with # are comments.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// message is one object of govulncheck's JSON stream: only the fields read.
type message struct {
	Config *struct {
		ScannerVersion string `json:"scanner_version"`
		DB             string `json:"db"`
		GoVersion      string `json:"go_version"`
	} `json:"config"`
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *struct {
		OSV          string `json:"osv"`
		FixedVersion string `json:"fixed_version"`
		Trace        []struct {
			Module   string `json:"module"`
			Version  string `json:"version"`
			Package  string `json:"package"`
			Function string `json:"function"`
			Receiver string `json:"receiver"`
		} `json:"trace"`
	} `json:"finding"`
}

// reached is a vulnerability the code calls into.
type reached struct {
	id, summary, module, version, fixed, symbol string
}

func main() {
	govulncheck := flag.String("govulncheck", "govulncheck", "the govulncheck binary")
	db := flag.String("db", "", "directory of the vulnerability database (indexdb's output)")
	acceptedFile := flag.String("accepted", "hack/vuln-accepted.txt", "the accepted findings")
	binary := flag.Bool("binary", false, "the arguments are built programs, scanned in govulncheck's binary mode")
	flag.Parse()
	if *db == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: vulncheck -db DIR [-govulncheck BIN] [-accepted FILE] [-binary] PACKAGES-OR-PROGRAMS...")
		os.Exit(2)
	}
	if err := run(*govulncheck, *db, *acceptedFile, *binary, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(1)
	}
}

func run(govulncheck, db, acceptedFile string, binary bool, targets []string) error {
	accepted, err := readAccepted(acceptedFile)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(db)
	if err != nil {
		return err
	}
	found, err := scan(govulncheck, abs, binary, targets)
	if err != nil {
		return err
	}

	var problems []string
	ids := make([]string, 0, len(found))
	for id := range found {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := found[id]
		line := fmt.Sprintf("%s %s@%s (fixed in %s), reached at %s: %s", r.id, r.module, r.version, orNone(r.fixed), r.symbol, r.summary)
		if reason, ok := accepted[id]; ok {
			fmt.Printf("accepted  %s\n          because %s\n", line, reason)
			continue
		}
		problems = append(problems, "not accepted: "+line)
	}
	for id := range accepted {
		if _, ok := found[id]; !ok {
			problems = append(problems, fmt.Sprintf("accepted but no longer reached: %s (remove it from %s)", id, acceptedFile))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return errors.New(strings.Join(problems, "\n"))
	}
	fmt.Printf("%d reachable vulnerabilities, each accepted with its reason\n", len(found))
	return nil
}

// scan runs govulncheck against the database in db over targets: one scan
// of the packages, or one per program in binary mode, their findings
// taken together.
func scan(govulncheck, db string, binary bool, targets []string) (map[string]reached, error) {
	scans := [][]string{targets}
	if binary {
		scans = nil
		for _, t := range targets {
			scans = append(scans, []string{"-mode", "binary", t})
		}
	}
	found := map[string]reached{}
	for _, args := range scans {
		cmd := exec.Command(govulncheck, append([]string{"-db", "file://" + db, "-format", "json"}, args...)...)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		// govulncheck's JSON mode exits 0 whatever it finds; anything else
		// is a failure to scan.
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", govulncheck, err, stderr.String())
		}
		some, scanner, err := parse(&out)
		if err != nil {
			return nil, err
		}
		fmt.Printf("govulncheck %s over %s, database %s\n", scanner, strings.Join(args, " "), db)
		for id, r := range some {
			if _, ok := found[id]; !ok {
				found[id] = r
			}
		}
	}
	return found, nil
}

// parse reads govulncheck's JSON stream: the vulnerabilities whose symbols
// the code calls (one trace each is enough), and the scanner's version.
func parse(r io.Reader) (map[string]reached, string, error) {
	dec := json.NewDecoder(r)
	summaries := map[string]string{}
	found := map[string]reached{}
	scanner := ""
	for {
		var m message
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", fmt.Errorf("reading govulncheck's output: %w", err)
		}
		switch {
		case m.Config != nil:
			scanner = m.Config.ScannerVersion
			if m.Config.GoVersion != "" {
				scanner += " (" + m.Config.GoVersion + ")"
			}
		case m.OSV != nil:
			summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil && len(m.Finding.Trace) > 0 && m.Finding.Trace[0].Function != "":
			f := m.Finding
			if _, ok := found[f.OSV]; ok {
				continue
			}
			t := f.Trace[0]
			symbol := t.Package + "." + t.Function
			if t.Receiver != "" {
				symbol = t.Package + "." + strings.TrimPrefix(t.Receiver, "*") + "." + t.Function
			}
			found[f.OSV] = reached{id: f.OSV, module: t.Module, version: t.Version, fixed: f.FixedVersion, symbol: symbol}
		}
	}
	for id, r := range found {
		r.summary = summaries[id]
		found[id] = r
	}
	return found, scanner, nil
}

// readAccepted reads the accepted findings: ID, then the reason.
func readAccepted(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, reason, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(id, "GO-") || strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s:%d: want \"GO-YYYY-NNNN reason\"", path, n)
		}
		out[id] = strings.TrimSpace(reason)
	}
	return out, s.Err()
}

func orNone(s string) string {
	if s == "" {
		return "no release yet"
	}
	return s
}
