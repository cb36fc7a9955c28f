package links

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edgelink/edgelink/shared/link"
)

// marketingURLs are targets as campaigns send them: tracking parameters,
// mixed case, a default port, an escape to keep.
var marketingURLs = []string{
	"https://shop.example.com/campaign/spring-sale/1234?utm_source=newsletter&utm_medium=email&utm_campaign=spring&uid=7000001",
	"https://Shop.Example.com:443/c/2026/landing.html?ref=abc&id=99#top",
	"http://www.example.org/a/b/c/d?q=%E6%97%A5%E6%9C%AC&x=1",
	"https://example.com/",
}

func BenchmarkNormalizeURL(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := NormalizeURL(marketingURLs[i%len(marketingURLs)], TargetPolicy{}); err != nil {
			b.Fatal(err)
		}
	}
}

// memStore is a Store whose writes succeed at once: what the service
// itself spends on a create, the database aside.
type memStore struct {
	Store
	version uint64
}

func (m *memStore) WriteTx(ctx context.Context, fn func(Tx) error) error { return fn(m) }
func (m *memStore) Autocommit() Tx                                       { return m }

func (m *memStore) ClaimKeys(_ context.Context, keys []IdemKey) ([]bool, error) {
	out := make([]bool, len(keys))
	for i := range out {
		out[i] = true
	}
	return out, nil
}

func (m *memStore) StoredResponses(context.Context, []IdemKeyID) (map[IdemKeyID]StoredResponse, error) {
	return nil, nil
}
func (m *memStore) FinishKeys(context.Context, []IdemKeyID, [][]byte) error { return nil }

func (m *memStore) InsertLinks(_ context.Context, ls []NewLink) ([]bool, error) {
	out := make([]bool, len(ls))
	now := time.Now()
	for i, nl := range ls {
		m.version++
		nl.Link.Version, nl.Link.CreatedAt, nl.Link.UpdatedAt, nl.Link.Status = m.version, now, now, link.Active
		out[i] = true
	}
	return out, nil
}

func (m *memStore) DomainByID(_ context.Context, id link.DomainID) (link.Domain, error) {
	if id != link.DefaultDomain {
		return link.Domain{}, link.ErrNotFound
	}
	return link.Domain{Host: "s.example", CodeMode: link.CodesSequential, Status: link.DomainActive}, nil
}

func (m *memStore) DomainByHost(context.Context, string) (link.Domain, error) {
	return link.Domain{}, link.ErrNotFound
}

type seqIDs struct{ n uint64 }

func (s *seqIDs) NextID(_ context.Context, d link.DomainID) (uint64, error) {
	s.n++
	return link.IDBase(d) + s.n, nil
}
func (*seqIDs) Done(uint64, bool) {}

// BenchmarkCreateBatch is the service's own work on a batch of 100
// marketing links without a key: validation, IDs, codes, answers.
func BenchmarkCreateBatch(b *testing.B) {
	svc := New(&memStore{}, &seqIDs{n: 1_000_000}, Config{})
	reqs := make([]CreateRequest, 100)
	for i := range reqs {
		reqs[i].URL = fmt.Sprintf("https://shop.example.com/campaign/spring-sale/%d?utm_source=newsletter&utm_medium=email&uid=%d", i, 7000000+i)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := svc.CreateBatch(context.Background(), 1, "", reqs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/link")
}

// TestNormalizeURLAllocations: a target with a plain host (ASCII, no
// punycode) and no dot segment in its path is normalized without IDNA or
// splitting its path: one allocation, the normalized URL, and one more
// for a host to lower-case (three and four before, at four times the CPU).
func TestNormalizeURLAllocations(t *testing.T) {
	for i, u := range marketingURLs[:2] {
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := NormalizeURL(u, TargetPolicy{}); err != nil {
				t.Fatal(err)
			}
		})
		if want := float64(1 + i); allocs > want {
			t.Errorf("NormalizeURL(%q) allocates %.0f times; want %.0f", u, allocs, want)
		}
	}
}

// TestBatchWithoutKeyAllocations: a batch without an idempotency key
// hashes nothing (no one compares it) and allocates a few times a link:
// its link, its item, its normalized URL (about 12 a link before).
func TestBatchWithoutKeyAllocations(t *testing.T) {
	svc := New(&memStore{}, &seqIDs{n: 1_000_000}, Config{})
	reqs := make([]CreateRequest, 100)
	for i := range reqs {
		reqs[i].URL = fmt.Sprintf("https://shop.example.com/campaign/spring-sale/%d?utm_source=newsletter&uid=%d", i, 7000000+i)
	}
	allocs := testing.AllocsPerRun(20, func() {
		res, err := svc.CreateBatch(context.Background(), 1, "", reqs)
		if err != nil || res.Items[99].Link == nil {
			t.Fatal(err, res.Items[99])
		}
	})
	if allocs > 600 {
		t.Errorf("a batch of 100 without a key allocates %.0f times; want at most 600", allocs)
	}
}
