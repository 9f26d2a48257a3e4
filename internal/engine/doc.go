// Package engine owns a scheduling core for a server: one goroutine applies
// commands to the core in batches, commits every change the batch caused to
// the store in one durable commit, and only then answers the commands and
// publishes the decisions. Reads are served from the read model
// (published.go), which the loop updates after each commit, so they never
// wait for the loop.
//
// Contracts:
//   - A command that returned nil is durable: its effect, and every
//     decision the core made in the same batch, is in the store.
//   - The core is touched only by the loop goroutine; no lock is held
//     across a store commit or across any network I/O.
//   - A store failure stops the engine: nothing after it is acknowledged,
//     because memory and disk could differ. A restart rebuilds from disk.
//
// Glossary:
//   - Command: one request to the loop (commands.go), one type each; it
//     runs on the loop and is answered after its step's commit.
//   - Step: one turn of the loop over a batch of commands: stage, encode,
//     durable commit, publish, answer (loop.go states each obligation).
//   - Staged: a step's changes before its commit (staging.go);
//     published: what readers see after it, the read model
//     (published.go).
//   - Record: a task, node, job or service as the store keeps it and the
//     API shows it (TaskRecord, NodeRecord, JobRecord, ServiceRecord).
//   - Session: an agent's registration and its assignment stream
//     (sessions.go); assignment: a task an agent is to run; holder: the
//     agent that registered a node.
//   - Event: one change in the event ring, numbered (events.go).
//   - Retention: finished work retired after --retain-finished
//     (retention.go); accounting record: what outlives it (accounting.go).
//   - Scoped id: a tenant's id qualified as "tenant:id" (tenancy.go).
//   - Volatile: an engine whose store keeps nothing (store.Discard).
//
// The Engine is a coordinator: the loop, the commit path and the
// recovery are its own; the rest are parts it holds, each with its state
// and a back reference for what it asks of the loop. It embeds the read
// model and the parts that serve a front end, so that their exported
// methods are the Engine's: published (the durable records, read without
// the loop), agents (the agent protocol), taskCommands, jobCommands,
// serviceCommands, poolCommands (the commands by noun) and loopViews (the
// reads that need the core). staging (staged), Accounting (acct),
// retention (ret), taskTracing (tracing) and gauges are held by name.
//
// Where things live, by what they own:
//
//	engine.go    Config, Engine (its state, by owner), New, Close
//	published.go the read model: records, listing orders, waiters (its
//	             own lock)
//	loop.go      the loop and its step: the commit path's order and its
//	             guarantee (step)
//	commands.go  the command interface and how commands are sent
//	commit.go    the commit path after the commands: encode, durable
//	             commit, publish
//	staging.go   the step's uncommitted changes and the loop's view over
//	             them; records refreshed from the core
//	tasks.go, nodes.go, queues.go, jobs.go, holders.go
//	             the commands on each kind of object, with their rules
//	agents.go    the agent protocol's commands (register, heartbeat,
//	             status) and liveness
//	sessions.go  the agents' state: sessions, assignment index and
//	             streams, usage, liveness (its own lock)
//	events.go    the event ring (its own lock)
//	gauges.go    metrics: decision counters, gauges, waiting counts
//	views.go     the loop's reads (loopViews): summary, node views, a
//	             task's place in its queue
//	record.go, recordjson.go
//	             the store's records and their encoding
//	recover.go   rebuilding from the store
//	tenancy.go   tenant-scoped ids and their localization
//	disk.go      the store's disk reserve
//	accounting.go, accounting_read.go
//	             the accounting records (type Accounting): written with a
//	             task's end, purged by the loop, read as history and usage
//	front.go     what a front end needs of the core's types, named here
//	             (a front end reaches the core only through the engine)
package engine
