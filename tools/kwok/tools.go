//go:build tools

// Package kwok pins KWOK, which simulates nodes and runs pods through their
// lifecycle for hetsched's Kubernetes tests. It is apart from tools/k8s: in
// that module KWOK would upgrade grpc, otel and x/* under the apiserver.
package kwok

import _ "sigs.k8s.io/kwok/cmd/kwok"
