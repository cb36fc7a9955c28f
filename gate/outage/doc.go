// Package outage holds launch-gate scenarios run end to end through the
// real control binary and an edge: a control process killed with SIGKILL
// mid-create, the ID space exhausted through the API, NATS and PostgreSQL
// stopped under load, an edge restarted while NATS is down. Each test
// records what it saw (IDs handed out, audited intervals, answers) with
// gate/evidence.
//
// Quick versions run in `go test`; the longer ones run only with
// EDGELINK_GATE=1, which `go tool task gate` sets.
package outage
