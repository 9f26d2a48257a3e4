package kube

import (
	"log/slog"

	"github.com/hetsched/hetsched/internal/store"
)

// OpenMemStore opens the store the Kubernetes front end's engine runs on.
// It keeps nothing (store.Discard): the cluster is the source of truth,
// and a new process rebuilds everything from it (see the package doc);
// the engine reads its store only when it starts, when there is nothing
// to read. (An in-memory Pebble did the same work for nothing: its commits
// were 8 % of the samples, 0.48 of 5.96 s, of a --cpu-profile of the
// hetsched run of `hetsched-bench kube`; BENCHMARKS.md, runs G–I.)
func OpenMemStore(_ *slog.Logger) (store.Store, error) {
	return &store.Discard{}, nil
}
