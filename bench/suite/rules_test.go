package main

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/bench/report"
)

func TestRulesPairsAndVerdicts(t *testing.T) {
	runs := []runRec{
		{scenario: scenRulesBefore, round: 1, perCPU: 100}, {scenario: scenRulesAfter, round: 1, perCPU: 101},
		{scenario: scenRulesPlain, round: 1, perCPU: 120}, {scenario: scenRulesThree, round: 1, perCPU: 100},
		{scenario: scenRulesAfter, round: 2, perCPU: 98}, {scenario: scenRulesBefore, round: 2, perCPU: 100},
		{scenario: scenRulesThree, round: 2, perCPU: 100}, // no partner: left out
	}
	ba, pr := rulesPairsOf(runs, scenRulesBefore, scenRulesAfter), rulesPairsOf(runs, scenRulesPlain, scenRulesThree)
	if len(ba) != 2 || ba[0].ratio() != 1.01 || ba[1].ratio() != 0.98 || len(pr) != 1 || 1/pr[0].ratio() != 1.2 {
		t.Fatalf("pairs %+v %+v", ba, pr)
	}
	for _, c := range []struct {
		s          report.Summary
		same, cost string
	}{
		{report.Summary{Median: 1.0, Min: 0.97, Max: 1.03, N: 3}, "kept", "kept"},
		{report.Summary{Median: 1.06, Min: 1.05, Max: 1.07, N: 3}, "not kept", "kept"},
		{report.Summary{Median: 1.29, Min: 1.2, Max: 1.4, N: 3}, "not kept", "dearest pair 1.40"},
		{report.Summary{Median: 1.3, Min: 1.3, Max: 1.3, N: 1}, "not kept", "not kept"},
		{report.Summary{Median: 1.0, Min: 0.8, Max: 1.2, N: 3}, "not conclusive", "kept"},
		{report.Summary{}, "not measured", "not measured"},
	} {
		if v := sameVerdict(c.s); !strings.Contains(v, c.same) || (c.same == "kept" && strings.Contains(v, "not")) {
			t.Errorf("sameVerdict(%+v) = %q, want %q", c.s, v, c.same)
		}
		if v := costVerdict(c.s); !strings.Contains(v, c.cost) || (c.cost == "kept" && strings.Contains(v, "not")) {
			t.Errorf("costVerdict(%+v) = %q, want %q", c.s, v, c.cost)
		}
	}
}

// TestRuleAnswers: a rule link's expected answer follows its rules by the
// classifier and the table, and the requests file replays and checks as
// the edge answers.
func TestRuleAnswers(t *testing.T) {
	tb := fixtureTable(t) // US below 100.64/10, DE above it
	us, de, cgn := netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("194.25.2.129"), netip.MustParseAddr("100.64.0.1")
	tg := ruleTargets(7)
	for _, c := range []struct {
		ua   string
		xff  netip.Addr
		want string
	}{
		{ruleUAs[0].ua, us, tg[0]}, {ruleUAs[1].ua, de, tg[1]}, {ruleUAs[2].ua, de, tg[2]}, {ruleUAs[3].ua, us, "own"}, {ruleUAs[2].ua, cgn, "own"},
	} {
		if got := ruleAnswer(tb, 7, "own", c.ua, c.xff); got != c.want {
			t.Errorf("%.20s from %s: %q, want %q", c.ua, c.xff, got, c.want)
		}
	}
	uas, xffs := ruleClientsOf(1, 1000, []netip.Addr{us, de})
	iphones := 0
	for _, ua := range uas {
		if ua == ruleUAs[0].ua {
			iphones++
		}
	}
	if len(uas) != 1000 || len(xffs) != 1000 || iphones < 350 || iphones > 550 {
		t.Fatalf("%d clients, %d iPhones (want about 450)", len(uas), iphones)
	}

	reqs := []ruleRequest{
		{Request: dataset.Request{Path: "/abc123", Status: 302, Location: "https://x.example/a"}, xff: us, ua: ruleUAs[0].ua},
		{Request: dataset.Request{Path: "/zzz999", Status: 404}, xff: de, ua: ruleUAs[2].ua},
	}
	file := filepath.Join(t.TempDir(), "r.tsv")
	if err := writeRuleRequests(file, reqs); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/abc123" && r.Header.Get("X-Forwarded-For") == "8.8.8.8" && r.Header.Get("User-Agent") == ruleUAs[0].ua {
			w.Header().Set("Location", "https://x.example/a")
			w.WriteHeader(302)
			return
		}
		w.WriteHeader(404)
	}))
	defer srv.Close()
	if n, err := checkRuleAnswers(t.Context(), &server{name: "t", url: srv.URL}, file, 10); err != nil || n != 2 {
		t.Fatalf("check: %d %v", n, err)
	}
	reqs[1].Status = 302
	if err := writeRuleRequests(file, reqs); err != nil {
		t.Fatal(err)
	}
	if _, err := checkRuleAnswers(t.Context(), &server{name: "t", url: srv.URL}, file, 10); err == nil {
		t.Fatal("a wrong answer passed the check")
	}
}
