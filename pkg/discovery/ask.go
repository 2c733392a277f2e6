package discovery

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// leavingKey is the configuration a pod's endpoint answers whether the pod
// is handing its keys off with ("1") or not ("0"); no client asks it.
const leavingKey = "leaving"

// Ask asks the endpoint on conn for the cluster, as a client's auto
// discovery does ("config get cluster"), and reads its answer. conn is
// ready for commands: over TLS and logged in when the endpoint wants it.
func Ask(conn io.ReadWriter) (Cluster, error) {
	body, err := askConfig(conn, "cluster", maxClusterBytes)
	if err != nil {
		return Cluster{}, err
	}
	return Parse(body)
}

// AskLeaving asks the endpoint on conn whether its pod is handing its keys
// off (Config.Leaving). An endpoint from before the question answers
// ERROR: an error.
func AskLeaving(conn io.ReadWriter) (bool, error) {
	body, err := askConfig(conn, leavingKey, 1)
	switch {
	case err != nil:
		return false, err
	case string(body) != "0" && string(body) != "1":
		return false, fmt.Errorf("the endpoint answered %q to whether it is leaving", body)
	}
	return string(body) == "1", nil
}

// askConfig asks the endpoint on conn for the configuration key ("config
// get key"), of at most limit bytes, and reads its answer.
func askConfig(conn io.ReadWriter, key string, limit int) ([]byte, error) {
	if _, err := io.WriteString(conn, "config get "+key+"\r\n"); err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	head = strings.TrimRight(head, "\r\n")
	var flags, n int
	if _, err := fmt.Sscanf(head, "CONFIG "+key+" %d %d", &flags, &n); err != nil {
		return nil, fmt.Errorf("the endpoint answered %q", head)
	}
	if n < 0 || n > limit {
		return nil, fmt.Errorf("the endpoint announced %d bytes", n)
	}
	body := make([]byte, n+len("\r\nEND\r\n"))
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	if string(body[n:]) != "\r\nEND\r\n" {
		return nil, errors.New("the endpoint's answer does not end with END")
	}
	return body[:n], nil
}
