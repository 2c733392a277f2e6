package move

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/example/memcached-operator/pkg/discovery"
)

// peersLeaving asks each server of from not gone whether it is leaving, at
// once, and returns those that say so. One that does not answer is not
// taken out: a copy to it fails, if it is down.
func (f *Follower) peersLeaving(ctx context.Context, from discovery.Cluster, gone map[string]bool) []string {
	var (
		mu  sync.Mutex
		out []string
		wg  sync.WaitGroup
	)
	for _, n := range from.Nodes {
		if gone[Server(n)] {
			continue
		}
		wg.Go(func() {
			if f.says(ctx, n, discovery.AskLeaving) {
				mu.Lock()
				out = append(out, Server(n))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// says tells whether the endpoint of n, asked with ask within 5 s, says
// true.
func (f *Follower) says(ctx context.Context, n discovery.Node, ask func(conn io.ReadWriter) (bool, error)) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	address := net.JoinHostPort(n.IP, strconv.Itoa(f.EndpointPort))
	var conn net.Conn
	var err error
	if f.DialPeer != nil {
		conn, err = f.DialPeer(ctx, address, n.Host)
	} else {
		conn, err = f.Mover.Dial(ctx, address)
	}
	if err != nil {
		return false
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	yes, err := ask(conn)
	return err == nil && yes
}

// dialer reaches the servers of from and to by their addresses, and this
// pod's own at Local.
func (f *Follower) dialer(from, to discovery.Cluster) Dialer {
	type peer struct{ addr, host string }
	peers := map[string]peer{}
	for _, c := range []discovery.Cluster{from, to} {
		for _, n := range c.Nodes {
			p := peer{addr: net.JoinHostPort(n.IP, strconv.Itoa(int(n.Port))), host: n.Host}
			if strings.HasPrefix(n.Host, f.Host+".") {
				p = peer{addr: f.Local}
			}
			peers[Server(n)] = p
		}
	}
	dial := f.Mover.Dial
	return func(ctx context.Context, server string) (net.Conn, error) {
		p, ok := peers[server]
		switch {
		case !ok:
			return nil, fmt.Errorf("server %s is in neither membership", server)
		case p.host != "" && f.DialPeer != nil:
			return f.DialPeer(ctx, p.addr, p.host)
		}
		return dial(ctx, p.addr)
	}
}
