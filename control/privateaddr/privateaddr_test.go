package privateaddr

import (
	"net/netip"
	"strings"
	"testing"
)

func TestReason(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want string // a part of the reason; "" for a public address
	}{
		{"0.0.0.0", "0.0.0.0/8"},
		{"0.1.2.3", "0.0.0.0/8"},
		{"10.255.0.1", "private"},
		{"100.100.100.200", "carrier-grade NAT"},
		{"127.0.0.53", "loopback"},
		{"169.254.169.254", "instance metadata"},
		{"172.31.255.255", "private"},
		{"192.0.0.170", "IETF"},
		{"192.168.1.1", "private"},
		{"198.19.0.1", "benchmarking"},
		{"239.255.255.250", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"fd00::1", "unique local"},
		{"fe80::1%eth0", "link-local"},
		{"fec0::1", "site-local"},
		{"ff02::1", "multicast"},
		{"64:ff9b:1::1", "local-use NAT64"},
		{"::ffff:127.0.0.1", "IPv6 form of 127.0.0.1, a loopback"},
		{"::127.0.0.1", "IPv6 form of 127.0.0.1"},
		{"64:ff9b::a9fe:a9fe", "IPv6 form of 169.254.169.254"},
		{"2002:c0a8:101::", "IPv6 form of 192.168.1.1"},
		{"2002:0a00:0001:ffff::1", "IPv6 form of 10.0.0.1"},

		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"100.128.0.1", ""}, // just past carrier-grade NAT
		{"172.32.0.1", ""},  // just past 172.16/12
		{"198.20.0.1", ""},  // just past benchmarking
		{"11.0.0.0", ""},    // just past 10/8
		{"2606:4700::1111", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""},
		{"2002:808:808::", ""},
	} {
		got := Reason(netip.MustParseAddr(tc.addr))
		switch {
		case tc.want == "" && got != "":
			t.Errorf("Reason(%s) = %q; want public", tc.addr, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("Reason(%s) = %q; want a reason with %q", tc.addr, got, tc.want)
		}
	}
}

// Every IPv4 address has the same verdict in each IPv6 form that carries it.
func TestEmbeddedFormsAgree(t *testing.T) {
	for _, s := range []string{"0.0.0.1", "10.1.2.3", "127.0.0.1", "169.254.1.1", "192.0.0.8", "198.18.5.5", "224.0.0.1", "8.8.4.4", "203.0.113.9"} {
		v4 := netip.MustParseAddr(s)
		b := v4.As4()
		plain := Reason(v4) != ""
		for _, a := range []netip.Addr{
			netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: b[0], 13: b[1], 14: b[2], 15: b[3]}),
			netip.AddrFrom16([16]byte{0: 0x00, 1: 0x64, 2: 0xff, 3: 0x9b, 12: b[0], 13: b[1], 14: b[2], 15: b[3]}),
			netip.AddrFrom16([16]byte{0: 0x20, 1: 0x02, 2: b[0], 3: b[1], 4: b[2], 5: b[3]}),
		} {
			if got := Reason(a) != ""; got != plain {
				t.Errorf("%s is private: %v, but its form %s: %v", v4, plain, a, got)
			}
		}
	}
}
