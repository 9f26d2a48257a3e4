package kube

// ptr is a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }
