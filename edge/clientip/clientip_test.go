package clientip

import (
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestClient(t *testing.T) {
	r, err := New([]string{"10.0.0.0/8", "192.0.2.7", " 2001:db8:ffff::/48 ", ""})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		peer string
		xff  []string
		want string
	}{
		{"untrusted peer: its header is ignored", "203.0.113.9", []string{"198.51.100.1"}, "203.0.113.9"},
		{"trusted peer, one hop", "10.1.2.3", []string{"198.51.100.1"}, "198.51.100.1"},
		{"trusted chain: the rightmost untrusted hop", "10.1.2.3", []string{"1.1.1.1, 198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"a client cannot push itself past the proxy", "10.1.2.3", []string{"6.6.6.6, 198.51.100.1"}, "198.51.100.1"},
		{"several headers, in order", "10.1.2.3", []string{"6.6.6.6", "198.51.100.1, 10.0.0.1"}, "198.51.100.1"},
		{"a single trusted address", "192.0.2.7", []string{"198.51.100.2"}, "198.51.100.2"},
		{"its neighbour is not trusted", "192.0.2.8", []string{"198.51.100.2"}, "192.0.2.8"},
		{"IPv4 in IPv6 form", "::ffff:10.1.2.3", []string{"198.51.100.1"}, "198.51.100.1"},
		{"IPv6 proxy and client", "2001:db8:ffff::1", []string{"2001:db8:1::5"}, "2001:db8:1::5"},
		{"hops with ports", "10.1.2.3", []string{"[2001:db8:1::5]:4711, 10.0.0.2:80"}, "2001:db8:1::5"},
		{"only trusted hops: the last stands for the client", "10.1.2.3", []string{"10.0.0.5, 10.0.0.6"}, "10.0.0.5"},
		{"no header: the proxy itself", "10.1.2.3", nil, "10.1.2.3"},
		{"garbage before an untrusted hop is never reached", "10.1.2.3", []string{"not an ip, 198.51.100.1"}, "198.51.100.1"},
		{"garbage right after the proxy: the proxy", "10.1.2.3", []string{"198.51.100.1, nonsense"}, "10.1.2.3"},
		{"empty entries", "10.1.2.3", []string{" , ,198.51.100.1,, "}, "198.51.100.1"},
	}
	for _, tt := range tests {
		var xff [][]byte
		for _, h := range tt.xff {
			xff = append(xff, []byte(h))
		}
		got := r.Client(net.ParseIP(tt.peer), xff)
		if want := netip.MustParseAddr(tt.want); got != want {
			t.Errorf("%s: Client(%s, %q) = %v; want %v", tt.name, tt.peer, tt.xff, got, want)
		}
	}
	var none Resolver
	if got := none.Client(net.ParseIP("10.1.2.3"), [][]byte{[]byte("198.51.100.1")}); got != netip.MustParseAddr("10.1.2.3") {
		t.Errorf("no trusted proxies: %v; want the peer", got)
	}
}

func TestNewRejects(t *testing.T) {
	for _, s := range []string{"10.0.0.0/33", "example.com", "10.0.0"} {
		if _, err := New([]string{s}); err == nil {
			t.Errorf("New(%q) succeeded; want an error", s)
		}
	}
}

func FuzzClient(f *testing.F) {
	r, _ := New([]string{"10.0.0.0/8", "::1/128"})
	f.Add([]byte{10, 0, 0, 1}, "198.51.100.1, 10.0.0.2")
	f.Add([]byte{203, 0, 113, 9}, "1.2.3.4")
	f.Fuzz(func(t *testing.T, peer []byte, xff string) {
		got := r.Client(net.IP(peer), [][]byte{[]byte(xff)})
		p, _ := netip.AddrFromSlice(peer)
		if !r.Trusted(p) && got != p.Unmap() {
			t.Fatalf("untrusted peer %v: client %v", p, got)
		}
	})
}

// conn is a connection that only has addresses; raw, when set, is the
// socket beneath a PROXY protocol header.
type conn struct {
	net.Conn
	remote net.Addr
	raw    net.Conn
}

func (c *conn) RemoteAddr() net.Addr { return c.remote }

type proxied struct{ *conn }

func (p proxied) Raw() net.Conn { return p.raw }

func tcp(s string) *net.TCPAddr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }

func TestProxied(t *testing.T) {
	r, err := New([]string{"10.0.0.0/8", "2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		c    net.Conn
		want bool
	}{
		{"a trusted proxy", &conn{remote: tcp("10.1.2.3:4000")}, true},
		{"anyone else", &conn{remote: tcp("203.0.113.9:4000")}, false},
		{"an IPv6 proxy", &conn{remote: tcp("[2001:db8::7]:4000")}, true},
		{"IPv4 in IPv6 form", &conn{remote: tcp("[::ffff:10.1.2.3]:4000")}, true},
		// Under a PROXY header the peer is the client the proxy named; the
		// socket beneath decides.
		{"PROXY header from a trusted proxy", proxied{&conn{remote: tcp("203.0.113.9:4000"), raw: &conn{remote: tcp("10.1.2.3:4000")}}}, true},
		{"PROXY-like conn from anyone else", proxied{&conn{remote: tcp("10.9.9.9:4000"), raw: &conn{remote: tcp("203.0.113.9:4000")}}}, false},
		{"not an IP socket", &conn{remote: &net.UnixAddr{Name: "/tmp/s", Net: "unix"}}, false},
		{"no address", &conn{}, false},
		{"no connection", nil, false},
	} {
		if got := r.Proxied(tt.c); got != tt.want {
			t.Errorf("%s: Proxied = %v; want %v", tt.name, got, tt.want)
		}
	}
	var none Resolver
	if none.Proxied(&conn{remote: tcp("10.1.2.3:4000")}) {
		t.Error("no trusted proxies: a connection counts as proxied")
	}
	c := &conn{remote: tcp("10.1.2.3:4000")}
	if n := testing.AllocsPerRun(100, func() { _ = r.Proxied(c) }); n != 0 {
		t.Errorf("Proxied allocates %v times per call; want 0", n)
	}
}

// TestClientDoesNotAllocate: the edge resolves the client of every
// redirect (its click's country and visitor hash), so reading a forwarded
// address allocates nothing, IPv4 or IPv6, through trusted hops.
func TestClientDoesNotAllocate(t *testing.T) {
	r, err := New([]string{"10.0.0.0/8", "2001:db8:ffff::/48"})
	if err != nil {
		t.Fatal(err)
	}
	peer := net.ParseIP("10.1.2.3")
	for _, xff := range []string{"203.0.113.9", "198.51.100.1, 10.0.0.7", "2001:db8::1234, 2001:db8:ffff::1"} {
		list := [][]byte{[]byte(xff)}
		want := netip.MustParseAddr(strings.TrimSpace(strings.Split(xff, ",")[0]))
		if got := r.Client(peer, list); got != want {
			t.Fatalf("Client(%q) = %v; want %v", xff, got, want)
		}
		if n := testing.AllocsPerRun(100, func() { r.Client(peer, list) }); n != 0 {
			t.Errorf("Client(%q) allocated %v times", xff, n)
		}
	}
	// A zone is no client's: the hop before it stands for the client.
	if got := r.Client(peer, [][]byte{[]byte("fe80::1%eth0")}); got != netip.MustParseAddr("10.1.2.3") {
		t.Fatalf("a zoned entry gave %v; want the trusted peer", got)
	}
}
