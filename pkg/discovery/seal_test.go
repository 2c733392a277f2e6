package discovery_test

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	testendpoint "github.com/example/memcached-operator/internal/testsupport/endpoint"
	"github.com/example/memcached-operator/pkg/discovery"
)

func TestASealReadsBackAsWritten(t *testing.T) {
	g := NewWithT(t)
	s := discovery.SealOf([]byte("3\na|10.0.0.1|11211\n"), nil)
	got, err := discovery.ParseSeal(s.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(s))
	g.Expect(got.VouchesCluster([]byte("3\na|10.0.0.1|11211\n"))).To(BeTrue())
	g.Expect(got.VouchesCluster([]byte("3\na|10.0.0.9|11211\n"))).To(BeFalse())
	g.Expect(got.VouchesPlan(nil)).To(BeTrue())
	g.Expect(got.VouchesPlan([]byte(`{"id":4}`))).To(BeFalse())
	for _, bad := range []string{"", "cluster=ab plan=cd", "plan=" + s.Plan + " cluster=" + s.Cluster, "cluster=" + s.Cluster} {
		_, err := discovery.ParseSeal(bad)
		g.Expect(err).To(HaveOccurred(), "%q", bad)
	}
}

// The endpoint serves only a membership the pod's seal vouches for: not
// one written to the ConfigMap by another hand (it keeps serving the last
// sealed one), and none before the pod was given a seal.
func TestTheEndpointServesOnlyASealedMembership(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	membership, seal := filepath.Join(dir, "cluster"), filepath.Join(dir, discovery.SealFile)
	write := func(path string, b []byte) {
		t.Helper()
		g.Expect(os.WriteFile(path+".tmp", b, 0o644)).To(Succeed())
		g.Expect(os.Rename(path+".tmp", path)).To(Succeed())
	}
	var log syncLog
	addr := testendpoint.Serve(t, "127.0.0.1", discovery.Config{Membership: membership, Seal: seal, Memcached: testendpoint.Free(t),
		Log: slog.New(slog.NewJSONHandler(&log, nil))})
	ask := func() (discovery.Cluster, error) {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
		g.Expect(conn.SetDeadline(time.Now().Add(5 * time.Second))).To(Succeed())
		return discovery.Ask(conn)
	}
	operators := discovery.Cluster{Version: 2, Nodes: []discovery.Node{{Host: "c-0.c.ns.svc", IP: "10.0.0.1", Port: 11211}}}
	forged := discovery.Cluster{Version: 3, Nodes: []discovery.Node{{Host: "c-0.c.ns.svc", IP: "192.0.2.7", Port: 11211}}}

	write(membership, operators.Body())
	_, err := ask()
	g.Expect(err).To(MatchError(ContainSubstring("no membership is published yet")), "no seal given yet")

	write(seal, []byte(discovery.SealOf(operators.Body(), nil).String()))
	g.Expect(ask()).To(Equal(operators))

	g.Expect(log.String()).NotTo(ContainSubstring("serving the last sealed membership"))
	write(membership, forged.Body())
	g.Expect(ask()).To(Equal(operators), "the forged membership is not served")
	g.Expect(log.String()).To(ContainSubstring("serving the last sealed membership: the seal does not vouch for the mounted one"), "and the pod's log says so")

	write(seal, []byte(discovery.SealOf(forged.Body(), nil).String()))
	g.Expect(ask()).To(Equal(forged), "served once the seal vouches for it")
}

// The endpoint serves at most MaxConnections at once: one more is closed
// unread, and once one of them ends a new one is served again.
func TestTheEndpointBoundsItsConnections(t *testing.T) {
	g := NewWithT(t)
	var log syncLog
	addr := sealedEndpoint(t, discovery.Config{MaxConnections: 3, Log: slog.New(slog.NewJSONHandler(&log, nil))})
	var idle []net.Conn
	for range 3 {
		conn, err := net.Dial("tcp", addr)
		g.Expect(err).NotTo(HaveOccurred())
		idle = append(idle, conn)
	}
	ask := func() error {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
		g.Expect(conn.SetDeadline(time.Now().Add(2 * time.Second))).To(Succeed())
		_, err = discovery.Ask(conn)
		return err
	}
	g.Expect(ask()).To(HaveOccurred(), "a fourth connection, while three idle ones are served")
	g.Expect(ask()).To(HaveOccurred(), "and a fifth")
	g.Expect(strings.Count(log.String(), "refusing connections")).To(Equal(1), "one line for refusals in a row: %s", log.String())
	idle[0].Close()
	g.Eventually(ask).WithTimeout(5*time.Second).Should(Succeed(), "served again once one ended")
	for _, conn := range idle[1:] {
		conn.Close()
	}
}

// One client's connections are bounded apart from the others': its flood
// leaves another client served.
func TestOneClientsFloodLeavesTheOthersServed(t *testing.T) {
	g := NewWithT(t)
	addr := sealedEndpoint(t, discovery.Config{MaxConnectionsPerClient: 2})
	from := func(ip string) (net.Conn, error) {
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return d.Dial("tcp", addr)
	}
	ask := func(ip string) error {
		conn, err := from(ip)
		g.Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
		g.Expect(conn.SetDeadline(time.Now().Add(2 * time.Second))).To(Succeed())
		_, err = discovery.Ask(conn)
		return err
	}
	for range 2 {
		conn, err := from("127.0.0.1")
		g.Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
	}
	g.Eventually(func() error { return ask("127.0.0.1") }).Should(HaveOccurred(), "a third connection of the flooding client")
	g.Expect(ask("127.0.0.2")).To(Succeed(), "another client, during the flood")
}

// sealedEndpoint serves, as c says, a membership of one slot its seal
// vouches for, and returns the endpoint's address.
func sealedEndpoint(t *testing.T, c discovery.Config) string {
	t.Helper()
	dir := t.TempDir()
	c.Membership, c.Seal, c.Memcached = filepath.Join(dir, "cluster"), filepath.Join(dir, discovery.SealFile), testendpoint.Free(t)
	cluster := discovery.Cluster{Version: 2, Nodes: []discovery.Node{{Host: "c-0.c.ns.svc", IP: "10.0.0.1", Port: 11211}}}
	if err := os.WriteFile(c.Membership, cluster.Body(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.Seal, []byte(discovery.SealOf(cluster.Body(), nil).String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return testendpoint.Serve(t, "127.0.0.1", c)
}

// syncLog is a log the endpoint's goroutines write to and a test reads.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
