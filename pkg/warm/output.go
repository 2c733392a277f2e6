package warm

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
)

func outcomeOf(mu *sync.Mutex, o *Outcome) Outcome {
	mu.Lock()
	defer mu.Unlock()
	return *o
}

// watchOutput copies memcached's standard error to w, line by line, and
// tells empty of each line in which memcached says it starts empty.
func watchOutput(r io.Reader, w io.Writer, empty func(line string)) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		line := s.Text()
		_, _ = fmt.Fprintln(w, line)
		if startsEmpty(line) {
			empty(line)
		}
	}
	// Whatever is left (a line too long) is still memcached's output.
	_, _ = io.Copy(w, r)
}

// startsEmpty tells whether a line of memcached's standard error says it
// starts with an empty cache (1.6.18's words, in restart.c and
// memcached.c, printed whatever the verbosity; a restore that worked is
// told only with -v).
func startsEmpty(line string) bool {
	return strings.HasPrefix(line, "[restart]") && strings.Contains(line, "starting with a clean cache")
}

// tailWriter keeps the last max bytes written to it. Written to by one
// goroutine, read once that one is done.
type tailWriter struct {
	max int
	b   []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	if over := len(w.b) - w.max; over > 0 {
		w.b = append(w.b[:0], w.b[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) bytes() []byte { return w.b }

// portOf is memcached's port in its command line: --port=N, --port N or
// -p N, else memcached's default.
func portOf(command []string) string {
	port := "11211"
	for i, a := range command {
		switch {
		case strings.HasPrefix(a, "--port="):
			port = strings.TrimPrefix(a, "--port=")
		case (a == "--port" || a == "-p") && i+1 < len(command):
			port = command[i+1]
		}
	}
	return port
}

// exitCode is a process's exit code as a shell reports it.
func exitCode(s *os.ProcessState) int {
	if s == nil {
		return 1
	}
	if ws, ok := s.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return s.ExitCode()
}
