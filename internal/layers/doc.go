// Package layers holds the repository's layer map and the test that keeps
// it (issue 46 §4): which package may import which. It has no code; the
// map is layers_test.go's table, and README's layout section describes it.
//
// Glossary:
//   - Layer: a rank of packages. A package imports only packages of its
//     own layer or lower ones (non-test imports), so no edge points back
//     up. From the bottom:
//     1 foundation (errors, quantities, JSON reading, addresses, child
//     processes, telemetry, the UI's assets, the recent series);
//     2 wire (API and agent protocol types, certificates, metrics, the
//     Kubernetes wire client, the load generator);
//     3 storage (the store, etcd, and the real-parts test harnesses);
//     4 models (the core and the other pure types: autoscaler, replicas,
//     probes, services, node pools, traces, device discovery, executor);
//     5 engine (the engine, the simulator, the demo, the core's benchmark
//     shapes);
//     6 controllers and clients (services, node pools, the CLI, the agent);
//     7 front ends (the HTTP server, the Kubernetes scheduler);
//     8 composition (hetsched up, the test servers, the whole-server
//     benchmarks, the process tests);
//     9 binaries (cmd/...).
//   - Front end: a package that serves the engine to the world (server,
//     kube). Nothing imports one but a composition root (layers 8 and 9),
//     and no benchmark imports one.
//   - Core rule: the core imports only the wire and foundation packages
//     api, errs and resource; the Kubernetes front end reaches the core
//     only through the engine.
package layers
