// Package replication holds the launch gate's fault-matrix scenarios that
// need PostgreSQL replication, end to end on a real primary and a real
// streaming replica (internal/pgserver), real NATS JetStream, control and
// an edge in-process:
//
//   - replica lag: edges' authority lookups are served by a replica whose
//     replay is paused; every link is followed right after its 201, and
//     every one must redirect (the primary answers every replica miss);
//   - database failover: the replica is cut off, the primary confirms more
//     segments, the replica is promoted and the old primary stopped; control
//     instances old and new must refuse to allocate (the witness in NATS
//     sees what the promoted database lost), hand out no duplicate ID, and
//     resume above every confirmed interval only after the operator's
//     recovery.
//
// Each records what it saw with gate/evidence. They run only with
// EDGELINK_GATE=1, which `go tool task gate` sets.
package replication
