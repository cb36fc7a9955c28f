package edgeserver

import (
	"fmt"
	"net"
	"time"

	"github.com/pires/go-proxyproto"
)

// listen opens the redirect port. With proxyProtocol, connections from the
// trusted proxies must start with a PROXY protocol header (v1 or v2), whose
// client address then stands as the connection's peer; connections from
// anyone else are served as they are, so a header they send is just a bad
// request.
func listen(addr string, proxyProtocol bool, trusted []string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if !proxyProtocol {
		return ln, nil
	}
	if len(trusted) == 0 {
		ln.Close()
		return nil, fmt.Errorf("listen: the PROXY protocol needs the trusted proxies that send it")
	}
	policy, err := proxyproto.PolicyFromRanges(trusted, proxyproto.REQUIRE, proxyproto.SKIP)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen: trusted proxies: %w", err)
	}
	return &proxyproto.Listener{Listener: ln, ConnPolicy: policy, ReadHeaderTimeout: 5 * time.Second}, nil
}
