package discovery

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"
)

// session is one client connection.
type session struct {
	conn net.Conn
	r    *bufio.Reader
	// up is the connection to memcached once one is opened: to check a
	// login, then to hand the client over.
	up net.Conn
	// authenticated: memcached accepted the client's login, or none is
	// needed.
	authenticated bool
}

// maxLogin bounds a login's data: a user name and a password.
const maxLogin = 1024

// login passes the client's login (memcached's ASCII authentication: a set
// whose data is "user password") to memcached, which alone judges it, and
// relays its answer; false: refused, and the connection is to be closed.
// The connection to memcached it opens is the one the client is handed
// over on, logged in.
func (s *Server) login(ctx context.Context, c *session, raw []byte) bool {
	rest, complete, err := upTo(c.r, maxDiscoveryLine)
	if err != nil {
		return false
	}
	fields := strings.Fields(string(rest))
	var n int
	if !complete || len(fields) < 4 {
		refuse(c.conn, "CLIENT_ERROR bad command line format\r\n")
		return false
	}
	if _, err := fmt.Sscan(fields[3], &n); err != nil || n < 0 || n > maxLogin {
		refuse(c.conn, "CLIENT_ERROR bad data chunk\r\n")
		return false
	}
	data := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, data); err != nil {
		return false
	}
	if c.up == nil {
		if c.up, err = s.c.DialMemcached(ctx, s.c.Memcached); err != nil {
			s.c.Log.Error("cannot reach memcached", "error", err.Error())
			refuse(c.conn, "SERVER_ERROR memcached is not answering\r\n")
			return false
		}
	}
	c.up.SetDeadline(time.Now().Add(s.c.CommandTimeout))
	if _, err := c.up.Write(slices.Concat(raw, rest, data)); err != nil {
		return false
	}
	reply, err := bufio.NewReader(c.up).ReadString('\n')
	if err != nil {
		return false
	}
	c.up.SetDeadline(time.Time{})
	if strings.TrimRight(reply, "\r\n") != "STORED" {
		refuse(c.conn, reply)
		return false
	}
	c.authenticated = true
	_, err = io.WriteString(c.conn, reply)
	return err == nil
}
