package dataset

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestZipfDistribution(t *testing.T) {
	const n, draws, s = 100_000, 400_000, 1.1
	z := NewZipf(rand.New(rand.NewPCG(1, 2)), s, n)
	counts := make([]int, n)
	for range draws {
		k := z.Rank()
		if k < 0 || k >= n {
			t.Fatalf("rank %d outside [0, %d)", k, n)
		}
		counts[k]++
	}
	// P(k) ∝ 1/(k+1)^s: rank 0 is drawn 2^s times as often as rank 1 and
	// 10^s times as often as rank 9.
	for _, c := range []struct {
		k    int
		want float64
	}{{1, math.Pow(2, s)}, {9, math.Pow(10, s)}} {
		got := float64(counts[0]) / float64(counts[c.k])
		if math.Abs(got-c.want)/c.want > 0.15 {
			t.Errorf("count(rank 0)/count(rank %d) = %.2f, want %.2f ± 15%%", c.k, got, c.want)
		}
	}
	// Skewed as a campaign is: the hottest 1% of links take most requests.
	top := 0
	for _, c := range counts[:n/100] {
		top += c
	}
	if share := float64(top) / draws; share < 0.5 || share > 0.9 {
		t.Errorf("top 1%% of ranks took %.2f of draws, want between 0.5 and 0.9", share)
	}
}

func TestTargetsLookReal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	total := 0
	const n = 20_000
	for range n {
		u := Target(r)
		if !strings.HasPrefix(u, "https://") || strings.ContainsAny(u, " \"$;{}\\") {
			t.Fatalf("target %q is not a plain https URL", u)
		}
		total += len(u)
	}
	if avg := float64(total) / n; avg < 70 || avg > 90 {
		t.Errorf("average target length %.1f bytes, want about 80", avg)
	}
}

func TestSampleMixAndAnswers(t *testing.T) {
	codes := []string{"000001", "000002", "00000a", "00000A"}
	urls := []string{"https://a/1", "https://a/2", "https://a/3", "https://a/4"}
	reqs := Sample(codes, urls, SampleConfig{Requests: 10_000, S: 1.1, Unknown: 0.10, Seed: 1})
	want := map[string]string{}
	for i, c := range codes {
		want["/"+c] = urls[i]
	}
	unknown := 0
	for _, q := range reqs {
		u, known := want[q.Path]
		switch {
		case q.Status == 404 && !known:
			unknown++
		case q.Status == 302 && known && q.Location == u:
		default:
			t.Fatalf("request %+v does not match the data set", q)
		}
	}
	if share := float64(unknown) / float64(len(reqs)); math.Abs(share-0.10) > 0.02 {
		t.Errorf("unknown share %.3f, want 0.10", share)
	}
	var buf bytes.Buffer
	if err := WriteRequests(&buf, reqs[:50]); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRequests(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(reqs[:50], got); diff != "" {
		t.Errorf("requests file round trip (-want +got):\n%s", diff)
	}
}

func TestCaseKeyKeepsCodesApartInLowerCase(t *testing.T) {
	seen := map[string]string{}
	r := rand.New(rand.NewPCG(5, 6))
	codes := []string{"00000a", "00000A", "zZzZzZ", "ZZZZZZ", "zzzzzz"}
	for range 50_000 {
		codes = append(codes, RandomCode(r))
	}
	for _, c := range codes {
		k := strings.ToLower(CaseKey(c))
		if prev, ok := seen[k]; ok && prev != c {
			t.Fatalf("CaseKey(%q) and CaseKey(%q) collide in lower case: %q", prev, c, k)
		}
		seen[k] = c
	}
	if got, want := CaseKey("0aB9zZ"), "0ab9zz-001001"; got != want {
		t.Errorf("CaseKey(0aB9zZ) = %q, want %q", got, want)
	}
}
