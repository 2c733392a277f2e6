// Drives memcached-elasticache, a Node memcached client with ElastiCache's
// auto discovery, for the tests: node elasticache.js <endpoint> <interval ms>.
// With DNS_SERVER set, names ending in .svc are resolved there (a cluster's
// DNS), under the cluster's domain DNS_DOMAIN (cluster.local by default), as
// a pod's search path resolves them: the client then runs outside the
// cluster.
//
// It reports each membership the client discovers as a JSON line
// {"event":"discover","nodes":[...]} on stdout, and takes commands on stdin,
// one per line, answering each with a JSON line:
//   set <n> <prefix>   stores <prefix>-0..n-1 with the value v-<prefix>-<i>
//   get <n> <prefix>   reads them back: hits (the right value), misses,
//                      wrong values and errors
//   quit
'use strict';

const dns = require('dns');
const readline = require('readline');

if (process.env.DNS_SERVER) {
  const resolver = new dns.Resolver();
  resolver.setServers([process.env.DNS_SERVER]);
  const systemLookup = dns.lookup;
  dns.lookup = (hostname, options, callback) => {
    if (typeof options === 'function') {
      callback = options;
      options = {};
    } else if (typeof options === 'number') {
      options = { family: options };
    }
    if (!/\.svc$/.test(hostname)) {
      return systemLookup(hostname, options, callback);
    }
    const domain = process.env.DNS_DOMAIN || 'cluster.local';
    resolver.resolve4(`${hostname}.${domain}`, (err, addresses) => {
      if (err) return callback(err);
      if (options.all) return callback(null, addresses.map((address) => ({ address, family: 4 })));
      return callback(null, addresses[0], 4);
    });
  };
}

const Client = require('memcached-elasticache');

const [endpoint, interval] = process.argv.slice(2);
const client = new Client(endpoint, {
  autoDiscoverInterval: Number(interval),
  // One try per operation, none held back: each failure is counted.
  retries: 0,
  timeout: 2000,
  remove: false,
  failures: 0,
  retry: 100,
});

function report(o) {
  process.stdout.write(JSON.stringify(o) + '\n');
}

client.on('autoDiscover', (nodes) => report({ event: 'discover', nodes }));
client.on('autoDiscoverFailure', (err) => report({ event: 'discoverFailure', error: String(err) }));

// each runs op for 0..n-1, a few at a time (as a server's requests would),
// and returns what each gave.
async function each(n, op) {
  const results = [];
  for (let i = 0; i < n; i += 5) {
    const batch = [];
    for (let j = i; j < Math.min(n, i + 5); j++) {
      batch.push(new Promise((resolve) => op(j, resolve)));
    }
    results.push(...(await Promise.all(batch)));
  }
  return results;
}

async function run(words) {
  const [cmd, n, prefix] = words;
  const key = (i) => `${prefix}-${i}`;
  const value = (i) => `v-${prefix}-${i}`;
  switch (cmd) {
    case 'set': {
      const results = await each(Number(n), (i, done) =>
        client.set(key(i), value(i), 600, (err) => done(err ? String(err) : null)));
      const errors = results.filter((e) => e !== null);
      report({ event: 'set', errors: errors.length, firstError: errors[0] || '' });
      break;
    }
    case 'get': {
      const results = await each(Number(n), (i, done) =>
        client.get(key(i), (err, data) => {
          if (err) done('error');
          else if (data === undefined) done('miss');
          else done(data === value(i) ? 'hit' : 'wrong');
        }));
      const count = (what) => results.filter((r) => r === what).length;
      report({ event: 'get', hits: count('hit'), misses: count('miss'), wrong: count('wrong'), errors: count('error') });
      break;
    }
    case 'quit':
      client.end();
      process.exit(0);
      break;
    default:
      report({ event: 'error', error: `unknown command ${cmd}` });
  }
}

const rl = readline.createInterface({ input: process.stdin });
let queue = Promise.resolve();
rl.on('line', (line) => {
  queue = queue.then(() => run(line.trim().split(/\s+/)));
});
rl.on('close', () => queue.then(() => process.exit(0)));
