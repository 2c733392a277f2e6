package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
)

// answer writes the answer to a discovery command; false: the command is
// not one, and the connection is to be closed.
func (s *Server) answer(ctx context.Context, conn net.Conn, words []string) bool {
	var reply []byte
	switch strings.Join(words, " ") {
	case "quit":
		return false
	case "version":
		v, err := s.memcachedVersion(ctx)
		if err != nil {
			s.c.Log.Error("memcached does not say its version", "error", err.Error())
			reply = []byte("SERVER_ERROR memcached is not answering\r\n")
			break
		}
		reply = []byte("VERSION " + v + "\r\n")
	case "config get cluster":
		body, err := s.served()
		if err != nil {
			reply = []byte("SERVER_ERROR " + err.Error() + "\r\n")
			break
		}
		reply = fmt.Appendf(nil, "CONFIG cluster 0 %d\r\n%s\r\nEND\r\n", len(body), body)
	case "config get " + leavingKey:
		v := "0"
		if s.c.Leaving != nil && s.c.Leaving() {
			v = "1"
		}
		reply = fmt.Appendf(nil, "CONFIG %s 0 1\r\n%s\r\nEND\r\n", leavingKey, v)
	case "get " + oldClusterKey:
		body, err := s.served()
		if err != nil {
			reply = []byte("SERVER_ERROR " + err.Error() + "\r\n")
			break
		}
		reply = fmt.Appendf(nil, "VALUE %s 0 %d\r\n%s\r\nEND\r\n", oldClusterKey, len(body), body)
	default:
		refuse(conn, "ERROR\r\n")
		return false
	}
	_, err := conn.Write(reply)
	return err == nil
}

// errUnpublished is the answer while nothing is published to serve.
var errUnpublished = errors.New("no membership is published yet")

// served is the membership to answer a client with. One that lists no
// server (what the operator publishes for a new Memcached until its slots
// are ready) is not served, but refused as unpublished: a client keeps the
// servers it has and asks again, where an empty list would leave it none.
func (s *Server) served() ([]byte, error) {
	body, err := s.membership()
	if err != nil {
		return nil, err
	}
	if c, err := Parse(body); err == nil && len(c.Nodes) == 0 {
		return nil, errUnpublished
	}
	return body, nil
}

// membership is the cluster's Body as the mounted file holds it, checked,
// and where the pod has a seal, the last one the seal vouched for: a
// membership no seal vouches for (written by another than the operator,
// or newer than the seal the kubelet wrote so far) is not served.
func (s *Server) membership() ([]byte, error) {
	body, err := s.mounted()
	if err != nil || s.c.Seal == "" {
		return body, err
	}
	seal, serr := ReadSeal(s.c.Seal)
	s.sealedMu.Lock()
	defer s.sealedMu.Unlock()
	switch {
	case serr == nil && seal.VouchesCluster(body):
		s.sealed = body
	case s.sealed == nil && (serr == nil || errors.Is(serr, ErrNoSeal)):
		return nil, errUnpublished
	case s.sealed == nil:
		s.c.Log.Error("cannot read the seal", "error", serr.Error())
		return nil, errors.New("the membership cannot be read")
	}
	if serr == nil && !seal.VouchesCluster(body) {
		s.c.Log.Warn("serving the last sealed membership: the seal does not vouch for the mounted one")
	}
	return s.sealed, nil
}

// mounted is the cluster's Body as the mounted file holds it, checked.
func (s *Server) mounted() ([]byte, error) {
	f, err := os.Open(s.c.Membership)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errUnpublished
		}
		s.c.Log.Error("cannot read the membership", "error", err.Error())
		return nil, errors.New("the membership cannot be read")
	}
	defer f.Close()
	body, err := io.ReadAll(io.LimitReader(f, maxClusterBytes+1))
	if err == nil {
		_, err = Parse(body)
	}
	if err != nil {
		s.c.Log.Error("the membership is not usable", "error", err.Error())
		return nil, errors.New("the membership cannot be read")
	}
	return body, nil
}
