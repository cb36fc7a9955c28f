package links

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/passhash"
)

// cheapHashes keeps the tests' argon2id at the smallest parameters its
// bounds allow.
var cheapHashes = passhash.Params{Memory: passhash.MinMemory, Time: 1, Threads: 1}

func extrasService() *Service {
	return New(nil, nil, Config{PasswordParams: cheapHashes, Hashers: 1, BlockedDomains: []string{"blocked.example"}})
}

func TestNormalizeRules(t *testing.T) {
	s := extrasService()
	in := []link.Rule{
		{Devices: []link.Device{link.DeviceDesktop, link.DeviceIOS}, Countries: []string{"us", "De", "AT"}, Languages: []string{"EN", "de"},
			Query: []link.QueryMatch{{Param: "ref", Equals: true, Value: "a b"}}, URL: "HTTPS://Example.COM:443/a/../b?x=1"},
		{Devices: []link.Device{link.DeviceAndroid}, URL: "https://bücher.example/"},
	}
	got, err := s.normalizeRules(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []link.Rule{
		{Devices: []link.Device{link.DeviceIOS, link.DeviceDesktop}, Countries: []string{"AT", "DE", "US"}, Languages: []string{"de", "en"},
			Query: []link.QueryMatch{{Param: "ref", Equals: true, Value: "a b"}}, URL: "https://example.com/b?x=1"},
		{Devices: []link.Device{link.DeviceAndroid}, URL: "https://xn--bcher-kva.example/"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("normalizeRules (-want +got):\n%s", diff)
	}
	if again, err := s.normalizeRules(got); err != nil || !cmp.Equal(again, got) {
		t.Errorf("normalizing normalized rules changed them: %+v, %v", again, err)
	}
	if in[0].Countries[0] != "us" {
		t.Error("normalizeRules changed its input")
	}
}

// TestNormalizeRulesRefuses: every way a creator's rules can be wrong is
// refused with the rule and the field named, hostile targets included.
func TestNormalizeRulesRefuses(t *testing.T) {
	s := extrasService()
	ios := []link.Device{link.DeviceIOS}
	ok := "https://example.com/"
	for _, tc := range []struct {
		name  string
		rules []link.Rule
		want  string // in the message
	}{
		{"17 rules", slices.Repeat([]link.Rule{{Devices: ios, URL: ok}}, link.MaxRules+1), "17 rules, at most 16"},
		{"10k rules", slices.Repeat([]link.Rule{{Devices: ios, URL: ok}}, 10_000), "10000 rules"},
		{"no condition", []link.Rule{{URL: ok}}, "rules[0]: a rule needs at least one condition"},
		{"no url", []link.Rule{{Devices: ios}}, "rules[0].url: a rule needs a target url"},
		{"javascript", []link.Rule{{Devices: ios, URL: "javascript:alert(document.cookie)"}}, "rules[0].url: "},
		{"data", []link.Rule{{Devices: ios, URL: "data:text/html,<script>x</script>"}}, "rules[0].url: "},
		{"CRLF", []link.Rule{{Devices: ios, URL: "https://example.com/\r\nLocation: https://evil.example/"}}, "rules[0].url: "},
		{"credentials", []link.Rule{{Devices: ios, URL: "https://bank.example@evil.example/"}}, "rules[0].url: credentials"},
		{"blocked", []link.Rule{{Devices: ios, URL: ok}, {Devices: ios, URL: "https://x.blocked.example/"}}, "rules[1].url: "},
		{"private", []link.Rule{{Devices: ios, URL: "http://127.0.0.1:8080/admin"}}, "rules[0].url: "},
		{"too long", []link.Rule{{Devices: ios, URL: "https://example.com/" + strings.Repeat("a", MaxURLLength)}}, "rules[0].url: "},
		{"device 0", []link.Rule{{Devices: []link.Device{0}, URL: ok}}, "rules[0].device[0]: devices are ios, android, desktop"},
		{"device twice", []link.Rule{{Devices: []link.Device{2, 2}, URL: ok}}, "rules[0].device[1]: android is listed twice"},
		{"UK", []link.Rule{{Countries: []string{"de", "uk"}, URL: ok}}, "rules[0].country[1]: \"uk\" is not an ISO 3166-1 alpha-2 country code (US, DE, GB); the United Kingdom is GB"},
		{"country twice", []link.Rule{{Countries: []string{"de", "DE"}, URL: ok}}, "rules[0].country[1]: DE is listed twice"},
		{"non-ASCII country", []link.Rule{{Countries: []string{"ÜS"}, URL: ok}}, "rules[0].country[0]:"},
		{"65 countries", []link.Rule{{Countries: slices.Repeat([]string{"US"}, 65), URL: ok}}, "rules[0].country: 65 codes, at most 64"},
		{"language tag", []link.Rule{{Languages: []string{"en-US"}, URL: ok}}, "rules[0].language[0]: \"en-US\" is not an ISO 639-1 language code"},
		{"non-ASCII language", []link.Rule{{Languages: []string{"日本"}, URL: ok}}, "rules[0].language[0]:"},
		{"three letters", []link.Rule{{Languages: []string{"eng"}, URL: ok}}, "rules[0].language[0]:"},
		{"empty param", []link.Rule{{Query: []link.QueryMatch{{Param: ""}}, URL: ok}}, "rules[0].query[0].param"},
		{"CRLF param", []link.Rule{{Query: []link.QueryMatch{{Param: "a\r\nb"}}, URL: ok}}, "rules[0].query[0].param: holds the control character"},
		{"long value", []link.Rule{{Query: []link.QueryMatch{{Param: "a", Equals: true, Value: strings.Repeat("v", 257)}}, URL: ok}}, "rules[0].query[0].equals"},
		{"5 query", []link.Rule{{Query: slices.Repeat([]link.QueryMatch{{Param: "a"}}, 5), URL: ok}}, "rules[0].query: 5 query conditions"},
	} {
		_, err := s.normalizeRules(tc.rules)
		if !errors.Is(err, link.ErrInvalidInput) {
			t.Errorf("%s: normalizeRules = %v; want ErrInvalidInput", tc.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %q does not say %q", tc.name, err, tc.want)
		}
	}
}

func TestExtras(t *testing.T) {
	s := extrasService()
	ctx := context.Background()
	x, err := s.extras(ctx, &CreateRequest{Rules: []link.Rule{{Countries: []string{"fr"}, URL: "https://example.fr/"}}, Password: "open sesame", MaxClicks: 3})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := passhash.Verify(x.PasswordHash, []byte("open sesame")); !ok || err != nil {
		t.Errorf("the stored hash does not verify the password: %v, %v", ok, err)
	}
	if x.MaxClicks != 3 || len(x.Rules) != 1 || x.Rules[0].Countries[0] != "FR" {
		t.Errorf("extras %+v", x)
	}
	for name, req := range map[string]CreateRequest{
		"short password":     {Password: "abc"},
		"password with CRLF": {Password: "secret\r\npass"},
		"long password":      {Password: strings.Repeat("p", passhash.MaxPasswordLen+1)},
		"negative limit":     {MaxClicks: -1},
		"huge limit":         {MaxClicks: 1 << 53},
	} {
		if _, err := s.extras(ctx, &req); !errors.Is(err, link.ErrInvalidInput) {
			t.Errorf("%s: extras = %v; want ErrInvalidInput", name, err)
		} else if req.Password != "" && strings.Contains(err.Error(), req.Password) {
			t.Errorf("%s: the error %q holds the password", name, err)
		}
	}
	// A plain create has none, and hashes nothing.
	if x, err := s.extras(ctx, &CreateRequest{}); err != nil || !x.IsZero() {
		t.Errorf("extras of a plain create = %+v, %v", x, err)
	}
}

func TestUpdateExtras(t *testing.T) {
	s := extrasService()
	ctx := context.Background()
	empty, pw, none := []link.Rule{}, "a new password", int64(0)
	var c Change
	if err := s.updateExtras(ctx, &Update{Rules: &empty, Password: &pw, MaxClicks: &none}, &c); err != nil {
		t.Fatal(err)
	}
	if !c.SetRules || c.Rules != nil || !c.SetPassword || c.PasswordHash == "" || !c.SetMaxClicks || c.MaxClicks != 0 {
		t.Errorf("change %+v", c)
	}
	clear := ""
	c = Change{}
	if err := s.updateExtras(ctx, &Update{Password: &clear}, &c); err != nil || !c.SetPassword || c.PasswordHash != "" || c.SetRules || c.SetMaxClicks {
		t.Errorf("clearing the password: %+v, %v", c, err)
	}
	bad := []link.Rule{{Devices: []link.Device{link.DeviceIOS}, URL: "javascript:x"}}
	if err := s.updateExtras(ctx, &Update{Rules: &bad}, &Change{}); !errors.Is(err, link.ErrInvalidInput) {
		t.Errorf("a bad rule in an update: %v", err)
	}
}

// TestHashersBound: no more passwords are hashed at once than Hashers;
// one that cannot get a turn before its context ends is unavailable, not
// hashed.
func TestHashersBound(t *testing.T) {
	s := extrasService() // one hasher
	s.hashers <- struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.hashPassword(ctx, "waiting for a turn"); !errors.Is(err, link.ErrUnavailable) {
		t.Fatalf("hashPassword with every hasher busy = %v; want ErrUnavailable", err)
	}
	<-s.hashers
	if _, err := s.hashPassword(context.Background(), "now there is one"); err != nil {
		t.Fatal(err)
	}
	if len(s.hashers) != 0 {
		t.Error("a hasher's turn was not given back")
	}
}

// TestReplayHash: two spellings of the same rules are one request; a
// password is part of a request only by being set, so its hash (fresh salt
// each time) does not make a retry another request; rules, the limit and
// whether there is a password do; and a link without extras hashes as it
// did before them.
func TestReplayHash(t *testing.T) {
	s := extrasService()
	ctx := context.Background()
	hashOf := func(req CreateRequest) string {
		t.Helper()
		l, err := s.validate(req)
		if err != nil {
			t.Fatal(err)
		}
		if l.Extras, err = s.extras(ctx, &req); err != nil {
			t.Fatal(err)
		}
		return string(requestHash("link", l, req.Code))
	}
	base := CreateRequest{URL: "https://example.com/"}
	spelled := func(cc ...string) CreateRequest {
		r := base
		r.Rules = []link.Rule{{Countries: cc, URL: "https://example.com/x"}}
		return r
	}
	if hashOf(spelled("us", "DE")) != hashOf(spelled("DE", "US")) {
		t.Error("two spellings of one rule hash apart")
	}
	withPw := func(pw string) CreateRequest { r := base; r.Password = pw; return r }
	if hashOf(withPw("first password")) != hashOf(withPw("first password")) {
		t.Error("one password hashes apart (the salt is in the request hash)")
	}
	limit := base
	limit.MaxClicks = 10
	distinct := map[string]string{"plain": hashOf(base), "rules": hashOf(spelled("US")), "other rules": hashOf(spelled("CA")),
		"password": hashOf(withPw("first password")), "limit": hashOf(limit)}
	seen := map[string]string{}
	for name, h := range distinct {
		if other, dup := seen[h]; dup {
			t.Errorf("%s and %s hash alike", name, other)
		}
		seen[h] = name
	}
	// The hash of a plain link is what it was before extras existed.
	l, _ := s.validate(base)
	old := sha256.Sum256([]byte("link\x00https://example.com/\x00never\x00302\x00\x00default\x00"))
	if distinct["plain"] != string(old[:]) || string(requestHash("link", l, "")) != string(old[:]) {
		t.Error("a plain create's request hash changed: keys stored before extras would not match their retries")
	}
}
