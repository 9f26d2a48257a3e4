package kube

import (
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hetsched/hetsched/internal/store"
)

// OpenMemStore opens the store the Kubernetes front end's engine runs on:
// in memory, since the cluster is the source of truth (a new process
// rebuilds everything from it, see the package doc).
func OpenMemStore(lg *slog.Logger) (*store.Disk, error) {
	return store.OpenDisk("/hetsched-kube", store.DiskOptions{
		Logger: lg,
		FS:     vfs.NewMem(),
		// Memory has no free-space reserve to keep.
		StatFS: func(string) (free, total uint64, err error) { return 1 << 50, 1 << 50, nil },
	})
}
