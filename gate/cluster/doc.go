// Package cluster holds launch-gate scenarios on a multi-node stack: a
// 3-node NATS JetStream cluster in the test process (every stream on 3
// replicas), control instances on one PostgreSQL and edges on different
// NATS nodes, under create and redirect load that checks every answer.
//
// TestNATSNodeLoss (2 controls in-process, 3 edges) shuts down the node
// leading LINK_CHANGES mid-load and restarts it. TestSoak (2 controls as
// child processes so they can be SIGKILLed, 2 edges) runs for EDGELINK_SOAK
// with a fault every EDGELINK_SOAK_FAULT_EVERY. Both record gate/evidence
// and run only with EDGELINK_GATE=1 (`go tool task gate`): they take
// minutes under -race on 2 shared cores.
package cluster
