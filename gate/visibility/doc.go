// Package visibility holds the launch-gate scenarios of the edge's two
// promises (docs/visibility.md): every link whose create returned 201
// redirects on every edge from the very next request, for any client at any
// rate; and an unknown code gets 404, not 429 or 503, while the authority is
// reachable, with the authority's work bounded by combining it, not by
// refusing clients. Each runs a real PostgreSQL, NATS, control and an edge
// with its default limits, and asks it from many loopback addresses.
//
// `go tool task test` runs them at a smaller scale; with EDGELINK_GATE=1
// (`go tool task gate`) they run at the scale the gate names.
package visibility
