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
//	gang        pods placed all or nothing: Kubernetes' PodGroup
//	            (scheduling.k8s.io/v1alpha2, spec.schedulingGroup),
//	            scheduler-plugins' PodGroup or hetsched.io/gang
//	            annotations (a job with a gang of minMember once that
//	            many wait; gangSpec, workloads.go)
//	binding     the decision carried back: a Binding whose annotations
//	            (hetsched.io/devices) the API server copies to the pod
//	report      why a pod waits: a FailedScheduling event and the
//	            PodScheduled=False condition
//	eviction    the end of a running pod's task decided by the engine
//	            (preemption), carried out through the Eviction API so that
//	            PodDisruptionBudgets hold
//	wire        how the Scheduler talks to the API server beyond
//	            client-go's informers: its Binder and its Pod informer
//	            (package kubewire: the poster, the lean watch, the
//	            gathering dial; --bind-via, --lean-watch,
//	            --gather-writes, client-go's paths one flag away)
//
// Files: scheduler.go (Config, Scheduler, Run), run.go (`hetsched kube`),
// nodes.go and pods.go (translation), dirty.go (changed keys),
// reconcile.go (cluster → engine), decisions.go (engine → cluster),
// podgroups.go and workloads.go (gangs from PodGroups).
package kube
