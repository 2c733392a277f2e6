package warm

import (
	"context"
	"strconv"
	"strings"

	"github.com/example/memcached-operator/pkg/memcachedconn"
)

// countItems asks the memcached c runs how many items it holds, over TLS
// and logged in as its command line says it takes connections.
func countItems(ctx context.Context, c Config) (int, error) {
	conn, err := filesOf(c.Command).Dial(ctx, c.Address)
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

// filesOf are the files a memcached run with command takes connections
// with: over TLS when it enables it, presenting its own certificate when
// it verifies clients' (ssl_ca_cert), logged in as the first user of its
// authentication file.
func filesOf(command []string) memcachedconn.Files {
	var f memcachedconn.Files
	ext := map[string]string{}
	for _, arg := range command[1:] {
		switch {
		case arg == "--enable-ssl" || arg == "-Z":
			f.TLS = true
		case strings.HasPrefix(arg, "--extended="):
			for opt := range strings.SplitSeq(strings.TrimPrefix(arg, "--extended="), ",") {
				k, v, _ := strings.Cut(opt, "=")
				ext[k] = v
			}
		case strings.HasPrefix(arg, "--auth-file="):
			f.Auth = strings.TrimPrefix(arg, "--auth-file=")
		}
	}
	f.Cert, f.Key, f.CA = ext["ssl_chain_cert"], ext["ssl_key"], ext["ssl_ca_cert"]
	f.ClientCertificate = f.CA != ""
	return f
}
