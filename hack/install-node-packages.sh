#!/usr/bin/env bash
# Installs, from Debian's packages, what the real node (hack/node.sh) and its
# images (hack/images.sh) need, when any of it is missing: containerd, runc,
# the CNI plugins, iptables, ipset (for kube-router's NetworkPolicies) and
# conntrack for the node; the Docker engine to
# build images; memcached and busybox-static, whose binaries become images;
# python3-pylibmc, a memcached client the tests run.
set -euo pipefail

need=()
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
command -v iptables >/dev/null || need+=(iptables)
command -v ipset >/dev/null || need+=(ipset)
command -v conntrack >/dev/null || need+=(conntrack)
command -v ip >/dev/null || need+=(iproute2)
command -v dockerd >/dev/null || need+=(docker.io)
[[ -x /usr/bin/memcached ]] || need+=(memcached)
[[ -x /bin/busybox ]] || need+=(busybox-static)
# pylibmc, a client on libmemcached, whose ring pkg/ring's tests check.
/usr/bin/python3 -c 'import pylibmc' 2>/dev/null || need+=(python3-pylibmc)
command -v curl >/dev/null || need+=(curl)
command -v gcc >/dev/null || need+=(gcc libc6-dev)
if ((${#need[@]} == 0)); then
  exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
  echo "the real node needs Debian packages: ${need[*]}; install them as root (apt-get install ${need[*]})" >&2
  exit 1
fi
echo "installing ${need[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
