package discovery

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Ask asks the endpoint on conn for the cluster, as a client's auto
// discovery does ("config get cluster"), and reads its answer. conn is
// ready for commands: over TLS and logged in when the endpoint wants it.
func Ask(conn io.ReadWriter) (Cluster, error) {
	if _, err := io.WriteString(conn, "config get cluster\r\n"); err != nil {
		return Cluster{}, err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return Cluster{}, err
	}
	head = strings.TrimRight(head, "\r\n")
	var flags, n int
	if _, err := fmt.Sscanf(head, "CONFIG cluster %d %d", &flags, &n); err != nil {
		return Cluster{}, fmt.Errorf("the endpoint answered %q", head)
	}
	if n < 0 || n > maxClusterBytes {
		return Cluster{}, fmt.Errorf("the endpoint announced %d bytes", n)
	}
	body := make([]byte, n+len("\r\nEND\r\n"))
	if _, err := io.ReadFull(r, body); err != nil {
		return Cluster{}, err
	}
	if string(body[n:]) != "\r\nEND\r\n" {
		return Cluster{}, errors.New("the endpoint's answer does not end with END")
	}
	return Parse(body[:n])
}
