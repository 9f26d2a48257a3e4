package kube

// For the tests of package kube_test, which run against the API server.
var (
	LeanClient   = leanClient
	LeanInformer = leanInformer
	ObjDiff      = objDiff
)
