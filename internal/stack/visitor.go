package stack

import (
	"fmt"
	"net"
	"net/http"
	"time"
)

// Visitor asks an edge from a loopback address of its own: all of
// 127.0.0.0/8 is loopback, so a test can be thousands of distinct clients,
// as the edge's per-client policy sees them. It keeps its connections
// alive, as a browser does. Safe for concurrent use.
type Visitor struct {
	EdgeURL string
	IP      net.IP
	client  *http.Client
}

// NewVisitor returns a visitor of edgeURL from ip (a 127.x.y.z address).
func NewVisitor(edgeURL string, ip net.IP) *Visitor {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	return &Visitor{EdgeURL: edgeURL, IP: ip, client: &http.Client{
		Timeout: followTimeout, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// LoopbackIP is the i-th client address of a test: 127.1.x.y, never
// 127.0.0.1 (which the servers and other tests use).
func LoopbackIP(i int) net.IP {
	return net.IPv4(127, 1+byte(i>>16), byte(i>>8), byte(i)).To4()
}

// Follow asks the edge for code once and returns the status and Location.
func (v *Visitor) Follow(code string) (status int, location string, err error) {
	resp, err := v.client.Get(v.EdgeURL + "/" + code)
	if err != nil {
		return 0, "", fmt.Errorf("from %s: %w", v.IP, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location"), nil
}

// FollowHost asks the edge for code on the domain host (the request's Host
// header; the connection still goes to EdgeURL) and returns the status and
// Location.
func (v *Visitor) FollowHost(host, code string) (status int, location string, err error) {
	req, err := http.NewRequest(http.MethodGet, v.EdgeURL+"/"+code, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	resp, err := v.client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("from %s: %w", v.IP, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location"), nil
}

// Close drops the visitor's idle connections.
func (v *Visitor) Close() { v.client.CloseIdleConnections() }
