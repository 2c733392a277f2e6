#!/usr/bin/python3
# Stores keys through pylibmc, Debian's Python client on libmemcached, with
# libketama's weighted ketama (libmemcached's MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED),
# for the tests of pkg/ring:
#
#   libmemcached.py <host:port,host:port,...> <n> <prefix>
#
# stores <prefix>-0..n-1 with the value v-<prefix>-<i> and prints
# {"errors": <how many sets failed>} on stdout. Debian's python3-pylibmc
# (make node-packages) runs under /usr/bin/python3.
import json
import sys

import pylibmc

servers, n, prefix = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3]
client = pylibmc.Client(servers, behaviors={"ketama_weighted": True})
if client.behaviors["distribution"] != "consistent weighted" or client.behaviors["hash"] != "md5":
    sys.exit("pylibmc did not take ketama_weighted: %r" % client.behaviors)
errors = 0
for i in range(n):
    key = "%s-%d" % (prefix, i)
    try:
        if not client.set(key, "v-" + key, time=600):
            errors += 1
    except pylibmc.Error:
        errors += 1
print(json.dumps({"errors": errors}))
