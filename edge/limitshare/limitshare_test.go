package limitshare_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/edge/limitshare"
	"github.com/edgelink/edgelink/edge/redirect"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/link"
)

func limited(t testing.TB, max, counted int64) []byte {
	t.Helper()
	b, err := link.AppendExtras(nil, &link.Extras{MaxClicks: max, ClicksCounted: counted})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// share runs a Share of limits over a new connection to srv until the test
// ends.
func share(t *testing.T, srv *natstest.Server, name string, limits *redirect.ClickLimits) *limitshare.Share {
	t.Helper()
	nc, _ := srv.Connect(t)
	s := limitshare.New(nc, limits, limitshare.Config{Edge: name, Every: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Run(ctx); err != nil {
			t.Errorf("share %s: %v", name, err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return s
}

// TestEdgesStopTogether: three edges sharing their reports over NATS stop
// a limited link once their redirects add up to its limit, whichever edge
// served them; without the reports each would have gone on to its own
// allowance.
func TestEdgesStopTogether(t *testing.T) {
	srv := natstest.Start(t)
	var limits [3]redirect.ClickLimits
	var shares [3]*limitshare.Share
	for i := range limits {
		shares[i] = share(t, srv, fmt.Sprintf("edge.%d", i), &limits[i])
	}
	code := []byte("shared-1")
	x := limited(t, 30, 0)
	// Edge 0 serves 20 and edge 1 serves 10; then edge 2, which served
	// nothing, refuses once their reports are in.
	for i := range 30 {
		e := 0
		if i >= 20 {
			e = 1
		}
		if !limits[e].Allow(link.DefaultDomain, code, x) {
			t.Fatalf("edge %d refused click %d of 30", e, i+1)
		}
	}
	poll.Until(t, "edge 2 hears that 30 were served", 30*time.Second, func() bool {
		return !limits[2].Allow(link.DefaultDomain, code, x)
	})
	poll.Until(t, "edge 0 hears edge 1's 10", 30*time.Second, func() bool {
		return !limits[0].Allow(link.DefaultDomain, code, x)
	})
	if limits[2].Shared.Load() == 0 || limits[0].Shared.Load() == 0 {
		t.Fatalf("refusals were not the reports': edge 0 %d, edge 2 %d", limits[0].Shared.Load(), limits[2].Shared.Load())
	}
	if shares[0].Published.Load() == 0 || shares[2].Received.Load() == 0 || shares[2].Bad.Load() != 0 {
		t.Fatalf("published %d, received %d, bad %d", shares[0].Published.Load(), shares[2].Received.Load(), shares[2].Bad.Load())
	}
	if shares[0].ID() == shares[1].ID() || !bytes.HasPrefix([]byte(shares[0].ID()), []byte("edge.0/")) {
		t.Fatalf("ids %q %q", shares[0].ID(), shares[1].ID())
	}
}

// TestHostileReportsIgnored: messages that are not reports, or carry
// values out of range, change nothing and are counted.
func TestHostileReportsIgnored(t *testing.T) {
	srv := natstest.Start(t)
	var limits redirect.ClickLimits
	s := share(t, srv, "victim", &limits)
	nc, _ := srv.Connect(t)
	good := limitshare.AppendReport(limitshare.AppendHeader(nil, "other/1"), 0, []byte("hostile"), 10, 0, 5)
	for _, m := range [][]byte{
		nil,
		{2, 1, 'x'},
		limitshare.AppendHeader(nil, ""),
		append(limitshare.AppendHeader(nil, "other/1"), 0xff),
		limitshare.AppendReport(limitshare.AppendHeader(nil, "other/1"), 0, []byte("bad code!"), 10, 0, 5),
		limitshare.AppendReport(limitshare.AppendHeader(nil, "other/1"), 0, []byte("hostile"), 0, 0, 5),
		limitshare.AppendReport(limitshare.AppendHeader(nil, "other/1"), 0, []byte("hostile"), 10, 0, link.MaxClicksLimit+1),
		good[:len(good)-1],
	} {
		if err := nc.Publish(limitshare.SubjectPrefix+"x", m); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Publish(limitshare.SubjectPrefix+"x", good); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the good report arrives", 30*time.Second, func() bool { return s.Received.Load() == 1 })
	if s.Bad.Load() != 8 {
		t.Fatalf("%d bad messages counted; want 8", s.Bad.Load())
	}
	x := limited(t, 10, 0)
	for i := range 5 {
		if !limits.Allow(0, []byte("hostile"), x) {
			t.Fatalf("refused click %d: the good report says 5 of 10", i+1)
		}
	}
	if limits.Allow(0, []byte("hostile"), x) {
		t.Fatal("an 11th click in all")
	}
}

// FuzzReports: no message makes the reader panic or hand on a report out
// of range.
func FuzzReports(f *testing.F) {
	f.Add(limitshare.AppendReport(limitshare.AppendHeader(nil, "e/1"), 3, []byte("abc123"), 100, 7, 9))
	f.Add([]byte{1, 1, 'e', 0, 4, 'a', 'b', 'c', 'd', 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, rest, err := limitshare.ReadHeader(b)
		if err != nil {
			return
		}
		for len(rest) > 0 {
			var r limitshare.Report
			if r, rest, err = limitshare.ReadReport(rest); err != nil {
				return
			}
			if r.Max < 1 || r.Base < 0 || r.Served < 0 || !link.ValidCodeSyntax(r.Code) || r.Domain > link.MaxDomainID {
				t.Fatalf("report out of range: %+v", r)
			}
		}
	})
}
