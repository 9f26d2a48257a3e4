// Package etcdstore is a store.Store on etcd (go.etcd.io/etcd/client/v3),
// for a highly available control plane: several hetsched servers share
// one etcd cluster, one leads and writes, the others are warm standbys.
// It passes the same contract suite as the Pebble store
// (internal/store/storetest).
//
// # Layout: a log of commits plus snapshots
//
// etcd refuses a request over 1.5 MiB and a transaction over 128
// operations by default, while one hetsched commit can carry a batch of
// thousands of tasks (a 5,000-task batch is about 2 MB) and must be all or
// nothing. So a Commit is written as one log entry, not as a key per
// record:
//
//	P log/<seq>/<chunk>    the commit's records, encoded, cut into chunks of ChunkBytes
//	P snap/<seq>/<chunk>   a snapshot: every live record at entry seq
//	P snapshot             the snapshot pointer {seq, chunks, bytes, crc32c}
//
// A commit's records are compressed with S2 before they are cut (task
// records, JSON, were stored 6.1× smaller in TestCommitsAreCompressed),
// and so is a snapshot's stream. The chunks of entry seq are written one
// transaction each, those before the last in parallel; the last carries
// the flag chunkLast, and its write is the commit's atomic point: an entry without its last chunk (the writer died in between) is
// ignored by readers and deleted by the next leader (Lead). Each chunk's
// transaction is guarded by the leader's Fence (its election key's create
// revision) and by the chunk key being new, so a deposed leader can never
// add an entry, nor a half of one, once another server leads.
//
// Every store keeps the live records in memory (as kube-apiserver's watch
// cache does): Get and Load are served from it, and a standby (Open
// before Lead) follows the log through a watch, so taking over reads only
// what the standby has not seen yet instead of the whole state.
//
// When the log has outgrown both SnapshotMinBytes and the last snapshot,
// the leader writes a snapshot of its copy in the background, points to
// it, deletes the log and snapshots it replaces, compacts etcd's history
// to that revision and defragments a member whose database could give
// back at least DefragMinFree and half of its size. A restart reads the
// snapshot plus at most about as much log again, so restart time is
// bounded by about twice the state's size, and what is written is at most
// about twice what is committed.
//
// Measured on the 2-vCPU development VM (`hetsched-bench ha`, every
// server and etcd member on it, BENCHMARKS.md "High availability"): with one
// embedded member and 1,000,000 tasks stored, a cold restart (the member, the
// snapshot and log read back, the engine rebuilt) acknowledges writes
// again 12.4 s after SIGKILL; a three-member standby takes over in 10.9
// s, 1 ms of it catching up its copy and 8.5 s rebuilding the engine from
// it (Pebble's cold restart: 5.8 s). Three members acknowledge 200,000
// batched tasks at 0.84–1.01 of Pebble's rate (0.35–0.49 before the
// compression).
//
// The rejected alternative, a key per record with large commits split into
// transactions under an intent record, writes every record twice per
// commit and makes every commit of more than 128 records several round
// trips; the log writes a commit once, in two rounds (the chunks before
// the last in parallel, then the last) over its compressed size. What the layout costs: the state is held in memory by every
// server, and one record cannot be read from etcd without the log (no
// `etcdctl get` per task).
//
// # Failures
//
// A write that fails (no quorum: etcd does not answer within
// RequestTimeout; a lost connection) has an unknown outcome, and a write
// refused by the fence means another server leads: in both cases the
// store fails for good (Err), every later Commit returns the failure, and
// the server steps down and opens the store again from etcd, which knows
// the truth. A full etcd database (its quota) is 507.
//
// Glossary:
//   - log entry: one Commit's records, numbered by seq from 1.
//   - chunk: a part of an entry or snapshot, at most ChunkBytes, whose
//     first byte's flags say whether it is the last (chunkLast) and
//     whether the payload is S2-compressed (chunkS2).
//   - snapshot: the live records at one entry, written by the leader.
//   - pointer: the key naming the snapshot readers start from.
//   - fence: the comparison that guards a leader's writes.
//   - tail: a standby's watch of the log.
package etcdstore
