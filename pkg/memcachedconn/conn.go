// Package memcachedconn connects to the memcached of its own pod, over TLS
// and with memcached's text-protocol authentication when memcached asks
// for them, and sends it text-protocol commands: the reloader and the warm
// runner speak to memcached through it.
package memcachedconn

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Timeout bounds a dial and everything sent on its connection.
const Timeout = 5 * time.Second

// Options are how to reach memcached.
type Options struct {
	// Address is memcached's host:port.
	Address string
	// TLS: memcached takes TLS connections only.
	TLS bool
	// Certificate, if set, is presented when memcached asks clients for
	// one (memcached's own, in the pod).
	Certificate *tls.Certificate
	// Login, if set, is the user:password entry of memcached's
	// authentication file to log in with.
	Login string
	// VerifyPeer, if set, judges the certificate memcached presents over
	// TLS: a memcached of another pod must prove it is one of the
	// Memcached's before a key or a login is sent to it.
	VerifyPeer func(tls.ConnectionState) error
}

// Dial connects to memcached and logs in when o says so. A connection
// that never leaves the pod does not verify memcached's certificate, which
// names the Service, not localhost (the reloader compares it with the
// mounted one instead); one to another pod's sets o.VerifyPeer.
func Dial(ctx context.Context, o Options) (net.Conn, error) {
	d := &net.Dialer{Timeout: Timeout}
	var conn net.Conn
	var err error
	if !o.TLS {
		conn, err = d.DialContext(ctx, "tcp", o.Address)
	} else {
		cfg := &tls.Config{
			MinVersion:         tls.VersionTLS12,
			InsecureSkipVerify: true, //nolint:gosec // loopback to the pod's own memcached; see Dial
			// Each Write of up to 16 KiB goes as one record: the key
			// mover's batches of values must (memcached 1.6.18 stalls on a
			// value cut across records; pkg/move's recordBudget).
			DynamicRecordSizingDisabled: true,
		}
		if o.Certificate != nil {
			cfg.Certificates = []tls.Certificate{*o.Certificate}
		}
		cfg.VerifyConnection = o.VerifyPeer
		conn, err = (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", o.Address)
	}
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(Timeout))
	if o.Login != "" {
		ok, err := Login(conn, o.Login)
		if err == nil && !ok {
			err = errors.New("memcached refuses the user of the authentication file")
		}
		if err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// Login sends memcached's text-protocol authentication for entry
// (user:password), and tells whether memcached took it.
func Login(conn net.Conn, entry string) (bool, error) {
	user, password, _ := strings.Cut(entry, ":")
	token := user + " " + password
	reply, err := Command(conn, "set auth 0 0 "+strconv.Itoa(len(token))+"\r\n"+token+"\r\n")
	if err != nil {
		return false, fmt.Errorf("authentication: %w", err)
	}
	switch {
	case reply == "STORED":
		return true, nil
	case strings.HasPrefix(reply, "CLIENT_ERROR"):
		return false, nil
	}
	return false, fmt.Errorf("authentication: memcached answered %q", reply)
}

// Command sends req and reads memcached's one-line reply.
func Command(conn net.Conn, req string) (string, error) {
	if _, err := conn.Write([]byte(req)); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// Stats sends "stats" and returns memcached's general statistics by name.
func Stats(conn net.Conn) (map[string]string, error) {
	if _, err := conn.Write([]byte("stats\r\n")); err != nil {
		return nil, err
	}
	stats := map[string]string{}
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "END" {
			return stats, nil
		}
		fields := strings.Fields(line)
		if len(fields) != 3 || fields[0] != "STAT" {
			return nil, fmt.Errorf("stats: memcached answered %q", line)
		}
		stats[fields[1]] = fields[2]
	}
}

// Entries are the user:password lines of an authentication file, as
// memcached reads them.
func Entries(b []byte) []string {
	var out []string
	for line := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}
