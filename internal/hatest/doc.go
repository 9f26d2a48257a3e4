// Package hatest holds the process tests of a replicated control plane:
// real `hetsched server --ha` processes (each with its embedded etcd
// member) on loopback, killed, frozen and restarted while clients and
// agents work through them. It has no code of its own.
package hatest
