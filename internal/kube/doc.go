// Package kube is hetsched's Kubernetes front end (`hetsched kube`): the
// cluster is the source of truth and the executor, the engine (and its
// core, the same as the server's) makes the decisions.
//
// Data flows one way each: informers → reconcile loop → engine commands;
// engine events → decision loop → API calls. The engine runs on an
// in-memory store: after a restart or a leader change everything is
// rebuilt from the cluster (running pods are adopted where they run, on
// the devices their annotation names; waiting pods are submitted again),
// so nothing the cluster acknowledged (a Binding) is lost or made twice.
//
// Glossary:
//
//	Scheduler   the front end: informers, the loops, the bind workers
//	node        a Kubernetes Node as an api.Node: allocatable as capacity
//	            (pods as kubernetes.io/pods), device-backed extended
//	            resources as devices "0".."N-1" with the discovery labels'
//	            model, taints, cordoned when unschedulable or not Ready
//	pod task    the task standing for a pod: its request as kube-scheduler
//	            computes it, node selector, tolerations, tier, queue; a
//	            lease that never expires, never re-queued (a pod runs once)
//	adoption    a pod already running (bound by another scheduler, or by
//	            this one before a restart) counted where it runs
//	            (engine.Adopt)
//	gang        pods placed all or nothing: hetsched.io/gang annotations
//	            (a job with a gang of minMember once that many wait)
//	binding     the decision carried back: a Binding whose annotations
//	            (hetsched.io/devices) the API server copies to the pod
//	report      why a pod waits: a FailedScheduling event and the
//	            PodScheduled=False condition
//	eviction    the end of a running pod's task decided by the engine
//	            (preemption), carried out through the Eviction API so that
//	            PodDisruptionBudgets hold
//	lean watch  the Pod informer's own REST client, whose protobuf
//	            decoders read watch events in place and leave managedFields
//	            undecoded (leanwatch.go)
//	decoded     the lean decoder's lists of containers, init containers
//	parts       and tolerations, each decoded once per distinct bytes and
//	            shared by the pods that carry them (leanparts.go)
//	poster      the Bindings posted without client-go's request builder,
//	            over the clientset's HTTP client (bindpost.go)
//	coalescing  the API server connection's writes gathered into one
//	conn        system call while one is in the kernel, its reads taking
//	            what the socket holds at once (coalesce.go)
//	binder      the poster's HTTP/2 connection of its own: each Binding's
//	            frames written by its bind worker, the answers read by one
//	            goroutine (h2bind.go); where the configuration asks for
//	            what only client-go's transport does, the poster sends
//
// Files: scheduler.go (Config, Scheduler, Run), nodes.go and pods.go
// (translation), dirty.go (changed keys), reconcile.go (cluster → engine),
// decisions.go (engine → cluster), bindpost.go, h2bind.go and h2read.go,
// leanwatch.go, leanpod.go, leanparts.go and coalesce.go (the cheaper paths of a pod's Binding and watch events).
package kube
