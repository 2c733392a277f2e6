package podlog

import (
	"fmt"
	"os"
)

// Bounds of a termination message. The kubelet keeps 4096 bytes of each
// container's, and less when a pod's containers together write more than
// 12 KiB: the operator quotes it in the Memcached's status and events.
const (
	// ErrorLimit bounds a message that is a Go error's: its start.
	ErrorLimit = 1000
	// OutputLimit bounds a message that is the end of a program's output
	// (memcached's standard error): the caller keeps its last bytes.
	OutputLimit = 2048
)

// TerminateWithError writes the start of err's message, at most ErrorLimit
// bytes, as the container's termination message (path).
func TerminateWithError(path string, err error) error {
	msg := err.Error()
	if len(msg) > ErrorLimit {
		msg = msg[:ErrorLimit]
	}
	return writeTermination(path, []byte(msg))
}

// TerminateWithOutput writes tail, the end of a program's output (at most
// OutputLimit bytes), as the container's termination message (path).
func TerminateWithOutput(path string, tail []byte) error {
	if len(tail) > OutputLimit {
		tail = tail[len(tail)-OutputLimit:]
	}
	return writeTermination(path, tail)
}

func writeTermination(path string, msg []byte) error {
	if err := os.WriteFile(path, msg, 0o644); err != nil { //nolint:gosec // the kubelet reads it
		return fmt.Errorf("writing the termination message: %w", err)
	}
	return nil
}
