// Package bench runs `helios bench`: a fair, reproducible comparison of
// Helios with nginx (and optionally HAProxy) on the machine it runs on.
//
// The scenarios (bench/scenarios.yaml) and the peer config templates
// (bench/peers) are data embedded from the bench directory at the root of
// the module; this package turns them into runs:
//
//   - three `helios backend` processes serve every proxy alike;
//   - each run renders the proxy's config, starts it pinned with taskset to
//     N CPUs (Helios with GOMAXPROCS=N, nginx with N workers), waits for
//     it to answer, warms it up, and measures one load generator run (wrk,
//     h2load, or the open-loop generator of package loadgen) while
//     sampling the proxy's CPU time and RSS from /proc;
//   - rounds interleave the proxies, and each metric is reported as the
//     median over rounds with its range, with Helios's ratio to each peer.
//
// Run writes results.json (schema in bench/README.md), report.md and two
// SVG charts. Every process it starts runs in its own process group and is
// stopped on every exit path.
package bench
