package podlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// A termination message keeps the start of an error and the end of a
// program's output, within what the kubelet keeps.
func TestTerminationMessagesAreBounded(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "termination-log")
	long := strings.Repeat("a", ErrorLimit) + "b"
	g.Expect(TerminateWithError(path, errors.New(long))).To(Succeed())
	b, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(long[:ErrorLimit]))

	out := "z" + strings.Repeat("y", OutputLimit)
	g.Expect(TerminateWithOutput(path, []byte(out))).To(Succeed())
	b, err = os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(out[1:]))
}
