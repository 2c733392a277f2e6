//go:build tools

// Package tools pins the Prometheus memcached exporter, built by
// hack/images.sh into the real node's exporter image.
package tools

import _ "github.com/prometheus/memcached_exporter/cmd/memcached_exporter"
