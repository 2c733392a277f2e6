// Command coredns is the cluster DNS of the local cluster's real node:
// CoreDNS with the plugins its Corefile (hack/node.sh) uses and no other,
// as CoreDNS's own main is with all of them; the rest (cloud providers'
// DNS among them) is code the node never runs and a build never needs.
package main

import (
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

func main() {
	coremain.Run()
}
