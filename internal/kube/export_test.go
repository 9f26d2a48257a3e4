package kube

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// BindDirect posts a Binding as a Scheduler does (bindPoster), for the
// tests against the API server.
func BindDirect(ctx context.Context, cs kubernetes.Interface, ns, name string, uid types.UID, node string, annotations map[string]string) error {
	return newBindPoster(cs).bind(ctx, ns, name, uid, node, annotations)
}
