package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsCluster is a JetStream cluster of in-process nats-server nodes routed
// to each other on loopback, each with its own store. Nodes keep their
// ports and stores across Stop and Start, as a restarted server would.
type natsCluster struct {
	nodes []*natsNode
}

type natsNode struct {
	name string
	opts *server.Options
	srv  *server.Server
}

// startNATSCluster runs n nodes and returns once JetStream has a meta
// leader and every node is current with it.
func startNATSCluster(t testing.TB, n int) *natsCluster {
	t.Helper()
	ports := freePorts(t, 2*n)
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i]))
	}
	c := &natsCluster{}
	for i := range n {
		dir, err := os.MkdirTemp("", "edgelink-gate-nats-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		c.nodes = append(c.nodes, &natsNode{name: fmt.Sprintf("n%d", i+1), opts: &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: ports[i],
			NoSigs: true, NoLog: true, JetStream: true, StoreDir: dir,
			Cluster: server.ClusterOpts{Name: "edgelink-gate", Host: "127.0.0.1", Port: ports[n+i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		}})
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.Stop(i)
		}
	})
	for i := range c.nodes {
		c.start(t, i)
	}
	c.waitHealthy(t)
	return c
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func (c *natsCluster) start(t testing.TB, i int) {
	t.Helper()
	nd := c.nodes[i]
	srv, err := server.NewServer(nd.opts)
	if err != nil {
		t.Fatalf("nats %s: %v", nd.name, err)
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		t.Fatalf("nats %s: not ready within 30s", nd.name)
	}
	nd.srv = srv
}

// Stop shuts node i down, as an operator's restart or a crash of the node
// would take it away (the store stays); stopping a stopped node is a no-op.
func (c *natsCluster) Stop(i int) {
	if nd := c.nodes[i]; nd.srv != nil {
		nd.srv.Shutdown()
		nd.srv.WaitForShutdown()
		nd.srv = nil
	}
}

// Start brings node i back on its ports and store and waits until the
// cluster is healthy again.
func (c *natsCluster) Start(t testing.TB, i int) {
	t.Helper()
	c.start(t, i)
	c.waitHealthy(t)
}

// waitHealthy polls until some running node is the JetStream meta leader
// and every running node is current with it.
func (c *natsCluster) waitHealthy(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		leader, current := false, true
		for _, nd := range c.nodes {
			if nd.srv == nil {
				continue
			}
			leader = leader || nd.srv.JetStreamIsLeader()
			current = current && nd.srv.JetStreamIsCurrent()
		}
		if leader && current {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats cluster: no meta leader with every node current after 2m")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL is node i's client URL; a client given one node learns the others
// from the cluster and fails over to them.
func (c *natsCluster) URL(i int) string {
	return fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[i].opts.Port)
}

// URLs lists every node.
func (c *natsCluster) URLs() string {
	var us []string
	for i := range c.nodes {
		us = append(us, c.URL(i))
	}
	return strings.Join(us, ",")
}

// index returns the node named name, or -1.
func (c *natsCluster) index(name string) int {
	for i, nd := range c.nodes {
		if nd.name == name {
			return i
		}
	}
	return -1
}

// connect returns a JetStream client on every node, closed with the test.
func (c *natsCluster) connect(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// streamInfo polls for stream's info (it may be electing a leader).
func streamInfo(t testing.TB, js jetstream.JetStream, stream string) *jetstream.StreamInfo {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := js.Stream(ctx, stream)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = s.Info(ctx)
		}
		cancel()
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s: no info with a leader after 1m: %v", stream, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replicasOf says how stream is replicated: its configured count and the
// servers holding it (leader first).
func replicasOf(info *jetstream.StreamInfo) (configured int, servers []string) {
	servers = append(servers, info.Cluster.Leader)
	for _, p := range info.Cluster.Replicas {
		servers = append(servers, p.Name)
	}
	return info.Config.Replicas, servers
}
