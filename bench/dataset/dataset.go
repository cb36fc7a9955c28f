// Package dataset makes what the benchmark loads and replays: realistic
// target URLs (domains, paths, UTM-style query strings, about 80 bytes on
// average), request samples with Zipf popularity as in a marketing
// campaign, a share of unknown codes, and a scan mode of random codes.
//
// Everything is deterministic for a seed, so two runs replay the same
// requests.
package dataset

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
)

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

var (
	domains = []string{
		"www.northwind-outfitters.com", "shop.bluepeak.io", "news.harborlight.org", "www.tidewater-bank.com",
		"campaigns.lumen-telecom.net", "store.oakridge-furniture.com", "blog.quartzlabs.dev", "www.saltmarsh-travel.co.uk",
		"m.redfernmedia.com", "app.brightpath-learning.com", "www.cedar-and-pine.shop", "events.metroarena.com",
		"offers.greenleaf-grocers.com", "www.vantage-insurance.com", "support.kitehill.io", "www.coralreef-hotels.com",
		"deals.summitsports.com", "www.pixelforge-games.com", "careers.ironbridge.com", "www.maplestreet-books.com",
	}
	sections = []string{"products", "campaigns", "blog", "landing", "collections", "offers", "events", "articles", "p", "promo"}
	words    = []string{
		"spring-sale", "summer", "winter-collection", "new-arrivals", "black-friday", "running-shoes", "rain-jacket",
		"coffee-maker", "gift-guide", "weekend", "members", "early-bird", "clearance", "city-break", "family-plan",
		"webinar", "checklist", "how-to-choose", "top-10", "launch", "back-to-school", "bundle", "trial", "referral",
	}
	sources   = []string{"newsletter", "sms", "facebook", "twitter", "instagram", "google", "partner", "push", "qr"}
	mediums   = []string{"email", "social", "cpc", "sms", "display", "affiliate", "print"}
	campaigns = []string{"spring_sale_2026", "summer26", "bf2025", "welcome_series", "reactivation_q3", "launch_week", "loyalty"}
)

// Target returns a realistic target URL. Hosts are lower case and the URL
// is already in the form control normalizes to, so every server in a run
// answers byte-identical Locations.
func Target(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("https://")
	b.WriteString(domains[r.IntN(len(domains))])
	b.WriteByte('/')
	b.WriteString(sections[r.IntN(len(sections))])
	for range r.IntN(2) {
		b.WriteByte('/')
		b.WriteString(words[r.IntN(len(words))])
	}
	if r.IntN(4) == 0 {
		fmt.Fprintf(&b, "/%d", r.IntN(100_000))
	}
	switch p := r.IntN(10); {
	case p < 5: // UTM-tagged, the common marketing case
		fmt.Fprintf(&b, "?utm_source=%s&utm_medium=%s&utm_campaign=%s",
			sources[r.IntN(len(sources))], mediums[r.IntN(len(mediums))], campaigns[r.IntN(len(campaigns))])
	case p < 8:
		fmt.Fprintf(&b, "?ref=%s&id=%d", sources[r.IntN(len(sources))], r.IntN(100_000))
	}
	return b.String()
}

// Zipf draws popularity ranks in [0, n): rank 0 is the hottest, and
// P(rank k) is proportional to 1/(k+1)^s.
type Zipf struct{ z *rand.Zipf }

// NewZipf returns a sampler; s must be greater than 1 and n at least 2.
func NewZipf(r *rand.Rand, s float64, n int) *Zipf {
	return &Zipf{z: rand.NewZipf(r, s, 1, uint64(n-1))}
}

// Rank draws one rank.
func (z *Zipf) Rank() int { return int(z.z.Uint64()) }

// RandomCode returns a random 6-character base62 code.
func RandomCode(r *rand.Rand) string {
	var b [6]byte
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b[:])
}

// Request is one replayed request and the answer it must get.
type Request struct {
	Path     string // "/" + code
	Status   int    // 302 or 404
	Location string // for a 302
}

// SampleConfig shapes a request sample.
type SampleConfig struct {
	Requests int     // sample length
	S        float64 // Zipf exponent, e.g. 1.1
	Unknown  float64 // share of codes that are not links (0.10 for the mix, 0.90 for a scan)
	Seed     uint64
}

// Sample draws cfg.Requests requests over codes (urls[i] is codes[i]'s
// target). Known codes are drawn by Zipf rank; ranks map to links through a
// seeded permutation so hot links are spread over the ID space rather than
// being its first IDs. Unknown codes are random 6-character codes that are
// not in codes.
func Sample(codes, urls []string, cfg SampleConfig) []Request {
	r := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	known := make(map[string]struct{}, len(codes))
	for _, c := range codes {
		known[c] = struct{}{}
	}
	z := NewZipf(r, cfg.S, len(codes))
	perm := r.Perm(len(codes))
	out := make([]Request, cfg.Requests)
	for i := range out {
		if r.Float64() < cfg.Unknown {
			c := RandomCode(r)
			for {
				if _, ok := known[c]; !ok {
					break
				}
				c = RandomCode(r)
			}
			out[i] = Request{Path: "/" + c, Status: 404}
			continue
		}
		k := perm[z.Rank()]
		out[i] = Request{Path: "/" + codes[k], Status: 302, Location: urls[k]}
	}
	return out
}

// WriteRequests writes one request per line: path, status, location,
// tab-separated. The wrk script reads the first field.
func WriteRequests(w io.Writer, reqs []Request) error {
	bw := bufio.NewWriter(w)
	for _, q := range reqs {
		fmt.Fprintf(bw, "%s\t%d\t%s\n", q.Path, q.Status, q.Location)
	}
	return bw.Flush()
}

// ReadRequestsFile reads the requests file WriteRequests wrote at path.
func ReadRequestsFile(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadRequests(f)
}

// ReadRequests reads what WriteRequests wrote.
func ReadRequests(rd io.Reader) ([]Request, error) {
	var out []Request
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("request line %d: %d fields", len(out)+1, len(f))
		}
		var q Request
		q.Path, q.Location = f[0], f[2]
		if _, err := fmt.Sscan(f[1], &q.Status); err != nil {
			return nil, fmt.Errorf("request line %d: %w", len(out)+1, err)
		}
		out = append(out, q)
	}
	return out, sc.Err()
}

// CaseKey is the nginx map key for code: the code in lower case, a dash,
// and a mask with 1 for each upper-case letter. nginx lower-cases map keys
// and looked-up values, so "00000a" and "00000A" collide in a plain map;
// "00000a-000000" and "00000a-000001" do not. nginx computes the mask per
// request with six one-character regex maps.
func CaseKey(code string) string {
	lower := []byte(code)
	mask := make([]byte, len(code))
	for i, c := range lower {
		mask[i] = '0'
		if c >= 'A' && c <= 'Z' {
			lower[i] = c + 'a' - 'A'
			mask[i] = '1'
		}
	}
	return string(lower) + "-" + string(mask)
}
