package discovery

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// clusterOfSize is a cluster whose Body is exactly size bytes: one node
// whose host name takes up the rest.
func clusterOfSize(size int) []byte {
	body := Cluster{Version: 1, Nodes: []Node{{Host: "h", IP: "10.0.0.1", Port: 11211}}}.Body()
	host := strings.Repeat("h", size-len(body)+1)
	return Cluster{Version: 1, Nodes: []Node{{Host: host, IP: "10.0.0.1", Port: 11211}}}.Body()
}

// A membership may be as large as maxClusterBytes, and no larger: parsed,
// and read from a client's answer.
func TestAMembershipOfTheLargestSizeIsRead(t *testing.T) {
	g := NewWithT(t)
	largest := clusterOfSize(maxClusterBytes)
	g.Expect(largest).To(HaveLen(maxClusterBytes))
	_, err := Parse(largest)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = Parse(clusterOfSize(maxClusterBytes + 1))
	g.Expect(err).To(MatchError(ContainSubstring("more than")))

	for _, tt := range []struct {
		body []byte
		ok   bool
	}{{largest, true}, {clusterOfSize(maxClusterBytes + 1), false}} {
		answer := fmt.Sprintf("CONFIG cluster 0 %d\r\n%s\r\nEND\r\n", len(tt.body), tt.body)
		_, err := Ask(&readWriter{Reader: strings.NewReader(answer)})
		if tt.ok {
			g.Expect(err).NotTo(HaveOccurred())
		} else {
			g.Expect(err).To(MatchError(ContainSubstring("announced")))
		}
	}
	_, err = Ask(&readWriter{Reader: strings.NewReader("CONFIG cluster 0 -1\r\n")})
	g.Expect(err).To(MatchError(ContainSubstring("announced -1 bytes")))
	// An empty answer is read, and is no membership.
	_, err = Ask(&readWriter{Reader: strings.NewReader("CONFIG cluster 0 0\r\n\r\nEND\r\n")})
	g.Expect(err).To(MatchError(ContainSubstring("no line of nodes")))
}

// readWriter answers from Reader and takes what is written.
type readWriter struct {
	*strings.Reader
	bytes.Buffer
}

func (rw *readWriter) Read(p []byte) (int, error)  { return rw.Reader.Read(p) }
func (rw *readWriter) Write(p []byte) (int, error) { return rw.Buffer.Write(p) }

// A line is complete when its end comes within the limit: a line of the
// limit's length is, one longer is not.
func TestALineIsReadUpToItsLimit(t *testing.T) {
	g := NewWithT(t)
	line, complete, err := upTo(bufio.NewReader(strings.NewReader("abcd\n")), 5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(complete).To(BeTrue())
	g.Expect(string(line)).To(Equal("abcd\n"))
	_, complete, err = upTo(bufio.NewReader(strings.NewReader("abcde\n")), 5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(complete).To(BeFalse())
}

// A connection given back frees its place, in all and for its client.
func TestAConnectionGivenBackFreesItsPlace(t *testing.T) {
	g := NewWithT(t)
	c := &connections{max: 2, perClient: 2, by: map[string]int{}}
	g.Expect(c.take("a")).To(BeEmpty())
	g.Expect(c.take("a")).To(BeEmpty())
	g.Expect(c.take("a")).NotTo(BeEmpty(), "the endpoint's most")
	c.give("a")
	g.Expect(c.by).To(HaveKeyWithValue("a", 1))
	g.Expect(c.take("a")).To(BeEmpty(), "a place freed")
	c.give("a")
	c.give("a")
	g.Expect(c.by).NotTo(HaveKey("a"), "a client with no connection is forgotten")
	g.Expect(c.n).To(BeZero())
}

// The mounted membership is served only when it parses and is no larger
// than maxClusterBytes: one a byte longer is not cut to size and served.
func TestTheMountedMembershipIsCheckedWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cluster")
	s := New(Config{Membership: path})
	for _, tt := range []struct {
		name string
		body []byte
		ok   bool
	}{
		{"the largest", clusterOfSize(maxClusterBytes), true},
		{"a byte too large", clusterOfSize(maxClusterBytes + 1), false},
		{"not a membership", []byte("not a membership\n"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(os.WriteFile(path, tt.body, 0o600)).To(Succeed())
			got, err := s.mounted()
			if tt.ok {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal(tt.body))
			} else {
				g.Expect(err).To(MatchError("the membership cannot be read"))
			}
		})
	}
}
