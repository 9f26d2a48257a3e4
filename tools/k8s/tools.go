//go:build tools

// Package k8s pins the real Kubernetes control plane that hetsched's
// Kubernetes tests run against: kube-apiserver and kube-scheduler from
// k8s.io/kubernetes, and etcd from go.etcd.io/etcd/server/v3. It is its own
// module so the main module's go.mod stays small; .ci/run builds the
// binaries once into a version-keyed cache outside the clone.
package k8s

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
