package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/internal/freeport"
)

// NATSConfig says how to run NATS JetStream in this process.
type NATSConfig struct {
	// Nodes is the cluster size: 0 or 1 runs a single server, more runs
	// that many nodes routed to each other on loopback.
	Nodes int
	// Dir holds the stores (a cluster's node i in Dir/n<i+1>). Empty
	// makes a temporary folder, removed by Close.
	Dir string
	// Port is a single server's client port; 0 picks a free one. It is
	// kept across restarts either way, so clients reconnect.
	Port int
	// Name is a single server's name (a cluster's nodes are n1, n2, …).
	Name string
}

// NATS is JetStream for the stack: embedded servers this process runs, or
// an external URL (External), which it never stops. Nodes keep their ports
// and stores across StopNode and StartNode, as a restarted server would.
// Stopping and starting nodes is for one goroutine at a time.
type NATS struct {
	nodes    []*natsNode
	temp     string
	external string
}

type natsNode struct {
	name string
	opts *server.Options
	srv  *server.Server
}

// StartNATS starts the servers and returns once each accepts clients and,
// for a cluster, JetStream has a meta leader every node is current with.
func StartNATS(ctx context.Context, cfg NATSConfig) (_ *NATS, err error) {
	n := &NATS{}
	defer closeOnError(&err, n.Close)
	dir, err := folder(cfg.Dir, "nats", &n.temp)
	if err != nil {
		return nil, err
	}
	size := max(cfg.Nodes, 1)
	// Client and route ports, kept across restarts: below the ephemeral
	// range, where no outgoing connection takes one while its node is down.
	ports, err := freeport.Ports(2 * size)
	if err != nil {
		return nil, err
	}
	if size == 1 {
		port := cfg.Port
		if port <= 0 {
			port = ports[0]
		}
		n.nodes = []*natsNode{{name: cfg.Name, opts: &server.Options{ServerName: cfg.Name,
			Host: "127.0.0.1", Port: port, NoSigs: true, NoLog: true, JetStream: true, StoreDir: dir}}}
	} else {
		var routes []string
		for i := range size {
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[size+i]))
		}
		for i := range size {
			name := fmt.Sprintf("n%d", i+1)
			n.nodes = append(n.nodes, &natsNode{name: name, opts: &server.Options{ServerName: name,
				Host: "127.0.0.1", Port: ports[i], NoSigs: true, NoLog: true, JetStream: true,
				StoreDir: filepath.Join(dir, name),
				Cluster:  server.ClusterOpts{Name: "edgelink-stack", Host: "127.0.0.1", Port: ports[size+i]},
				Routes:   server.RoutesFromStr(strings.Join(routes, ","))}})
		}
	}
	for i := range n.nodes {
		if err := n.start(i); err != nil {
			return nil, err
		}
	}
	return n, n.waitHealthy(ctx)
}

// NewNATS is StartNATS for a test: the servers stop when it ends.
func NewNATS(t testing.TB, cfg NATSConfig) *NATS {
	t.Helper()
	return started(t, "NATS", 2*time.Minute, func(ctx context.Context) (*NATS, error) { return StartNATS(ctx, cfg) }, (*NATS).Close)
}

// External is a NATS server this process does not run.
func External(url string) *NATS { return &NATS{external: url} }

func (n *NATS) start(i int) error {
	nd := n.nodes[i]
	srv, err := server.NewServer(nd.opts)
	if err != nil {
		return fmt.Errorf("nats %s: %w", nd.name, err)
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("nats %s: not ready within 30s", nd.name)
	}
	nd.srv = srv
	return nil
}

// waitHealthy polls until some running node is the JetStream meta leader
// and every running node is current with it (a single server at once).
func (n *NATS) waitHealthy(ctx context.Context) error {
	if len(n.nodes) < 2 {
		return nil
	}
	return Poll(ctx, "nats cluster: a meta leader with every node current", 2*time.Minute, func() bool {
		leader, current := false, true
		for _, nd := range n.nodes {
			if nd.srv != nil {
				leader = leader || nd.srv.JetStreamIsLeader()
				current = current && nd.srv.JetStreamIsCurrent()
			}
		}
		return leader && current
	})
}

// URL is the client URL of the first node (or the external server); a
// client given one node learns the others from the cluster.
func (n *NATS) URL() string {
	if n.external != "" {
		return n.external
	}
	return n.NodeURL(0)
}

// NodeURL is node i's client URL.
func (n *NATS) NodeURL(i int) string {
	return fmt.Sprintf("nats://127.0.0.1:%d", n.nodes[i].opts.Port)
}

// URLs lists every node, comma-separated, as clients take them.
func (n *NATS) URLs() string {
	if n.external != "" {
		return n.external
	}
	var us []string
	for i := range n.nodes {
		us = append(us, n.NodeURL(i))
	}
	return strings.Join(us, ",")
}

// Node is node i's server while it runs, nil while it is stopped.
func (n *NATS) Node(i int) *server.Server { return n.nodes[i].srv }

// NodeName is node i's server name.
func (n *NATS) NodeName(i int) string { return n.nodes[i].name }

// Index is the node named name, or -1.
func (n *NATS) Index(name string) int {
	for i, nd := range n.nodes {
		if nd.name == name {
			return i
		}
	}
	return -1
}

// StopNode shuts node i down (its store stays); stopping a stopped node is
// harmless.
func (n *NATS) StopNode(i int) {
	if nd := n.nodes[i]; nd.srv != nil {
		nd.srv.Shutdown()
		nd.srv.WaitForShutdown()
		nd.srv = nil
	}
}

// Stop shuts every node down.
func (n *NATS) Stop() {
	for i := range n.nodes {
		n.StopNode(i)
	}
}

// StartNode brings node i back on its ports and store and waits until the
// cluster is healthy again.
func (n *NATS) StartNode(ctx context.Context, i int) error {
	if n.nodes[i].srv == nil {
		if err := n.start(i); err != nil {
			return err
		}
	}
	return n.waitHealthy(ctx)
}

// Restart stops every node and starts them again, failing the test if one
// does not come back.
func (n *NATS) Restart(t testing.TB) {
	t.Helper()
	n.Stop()
	for i := range n.nodes {
		if err := n.StartNode(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
}

// Close stops every node and removes a temporary store folder.
func (n *NATS) Close() error {
	n.Stop()
	if n.temp != "" {
		return os.RemoveAll(n.temp)
	}
	return nil
}

// Connect dials every node with the options every client of the stack
// uses: reconnect forever, quickly, as production clients do.
func (n *NATS) Connect() (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(n.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		return nil, nil, fmt.Errorf("nats: connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// Client is Connect for a test, closed when the test ends.
func (n *NATS) Client(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, js, err := n.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, js
}
