// Package freeport picks loopback TCP ports for servers that must get the
// same port back when they restart (PostgreSQL, NATS).
//
// The ports lie below the kernel's ephemeral port range when there is room:
// a port from that range (what listening on port 0 gives) can become the
// source port of any outgoing connection on the machine while its server
// is stopped, or in the moment before it binds, and the server then cannot
// bind it. Below the range only a process that asks for that very port can
// take it.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Ports returns n distinct ports free on 127.0.0.1 now, below the
// ephemeral range when there is room.
func Ports(n int) ([]int, error) {
	ports := make([]int, 0, n)
	// Held open until all are picked, so no port is picked twice.
	for range n {
		l, err := listen()
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// listen listens on a port below the ephemeral range, or on one the kernel
// picks when there is no room below it or every try was taken.
func listen() (net.Listener, error) {
	if lo := EphemeralLow(); lo > 2048 {
		base := max(1024, lo-10000)
		for range 20 {
			port := base + rand.IntN(lo-base)
			if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
				return l, nil
			}
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// EphemeralLow is the first port of the kernel's ephemeral range, or 0
// when it cannot be read.
func EphemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0
	}
	lo, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return lo
}
