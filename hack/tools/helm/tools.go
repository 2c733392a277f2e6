//go:build tools

// Module helm builds the Helm command line the chart's tests run, from its Go
// module, into bin/helm.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
