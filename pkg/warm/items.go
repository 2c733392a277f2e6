package warm

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/example/memcached-operator/pkg/memcachedconn"
)

// countItems asks the memcached c runs how many items it holds, over TLS
// and logged in as its command line says it takes connections.
func countItems(ctx context.Context, c Config) (int, error) {
	o, err := connOptions(c.Command, c.Address)
	if err != nil {
		return 0, err
	}
	conn, err := memcachedconn.Dial(ctx, o)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	stats, err := memcachedconn.Stats(conn)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(stats["curr_items"])
}

// connOptions are how to connect to a memcached run with command: over
// TLS when it enables it, presenting its own certificate when it verifies
// clients' (ssl_ca_cert), logged in as the first user of its
// authentication file.
func connOptions(command []string, address string) (memcachedconn.Options, error) {
	o := memcachedconn.Options{Address: address}
	ext := map[string]string{}
	var authFile string
	for _, arg := range command[1:] {
		switch {
		case arg == "--enable-ssl" || arg == "-Z":
			o.TLS = true
		case strings.HasPrefix(arg, "--extended="):
			for opt := range strings.SplitSeq(strings.TrimPrefix(arg, "--extended="), ",") {
				k, v, _ := strings.Cut(opt, "=")
				ext[k] = v
			}
		case strings.HasPrefix(arg, "--auth-file="):
			authFile = strings.TrimPrefix(arg, "--auth-file=")
		}
	}
	if o.TLS && ext["ssl_ca_cert"] != "" {
		pair, err := tls.LoadX509KeyPair(ext["ssl_chain_cert"], ext["ssl_key"])
		if err != nil {
			return o, fmt.Errorf("memcached's certificate: %w", err)
		}
		o.Certificate = &pair
	}
	if authFile != "" {
		b, err := os.ReadFile(authFile)
		if err != nil {
			return o, err
		}
		if es := memcachedconn.Entries(b); len(es) > 0 {
			o.Login = es[0]
		}
	}
	return o, nil
}
