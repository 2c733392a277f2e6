// Package clusterdns resolves the local cluster's names from this
// machine, as a pod of the cluster resolves them.
package clusterdns

import (
	"context"
	"net"
)

// Domain is the local cluster's DNS domain.
const Domain = "cluster.local"

// Lookup resolves host, a name of the cluster such as <service>.<ns>.svc,
// with the cluster's DNS at server (the real node's address), under
// Domain as a pod's search path does.
func Lookup(ctx context.Context, server, host string) ([]string, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(server, "53"))
	}}
	return r.LookupHost(ctx, host+"."+Domain)
}
