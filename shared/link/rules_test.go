package link

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/text/language"
)

const testHash = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$" + "RdescudvJCsgt3ub+b+dWRWJTmaaJObGRdescudvJCs"

// sampleRules are rules of every kind of condition.
func sampleRules() []Rule {
	return []Rule{
		{Devices: []Device{DeviceIOS}, URL: "https://apps.apple.com/app/id1"},
		{Devices: []Device{DeviceAndroid, DeviceDesktop}, Countries: []string{"CA", "US"}, URL: "https://example.com/na"},
		{Languages: []string{"de", "fr"}, URL: "https://example.com/eu?x=1#f"},
		{Query: []QueryMatch{{Param: "beta"}, {Param: "utm_source", Equals: true, Value: "news letter"}, {Param: "empty", Equals: true}}, URL: "http://example.com/q"},
	}
}

func TestCheckRules(t *testing.T) {
	if err := CheckRules(sampleRules()); err != nil {
		t.Fatalf("CheckRules(sample): %v", err)
	}
	if err := CheckRules(nil); err != nil {
		t.Fatalf("CheckRules(nil): %v", err)
	}
	many := make([]Rule, MaxRules+1)
	for i := range many {
		many[i] = Rule{Devices: []Device{DeviceIOS}, URL: "https://a.example/"}
	}
	if err := CheckRules(many[:MaxRules]); err != nil {
		t.Fatalf("CheckRules(%d rules): %v", MaxRules, err)
	}
	ok := "https://example.com/"
	for _, tc := range []struct {
		name  string
		rules []Rule
		field string // the RuleError's Field; "-" for an error that is no RuleError
	}{
		{"too many", many, "-"},
		{"no condition", []Rule{{URL: ok}}, ""},
		{"unknown device", []Rule{{Devices: []Device{9}, URL: ok}}, "device[0]"},
		{"device 0", []Rule{{Devices: []Device{0}, URL: ok}}, "device[0]"},
		{"device twice", []Rule{{Devices: []Device{DeviceIOS, DeviceIOS}, URL: ok}}, "device[1]"},
		{"four devices", []Rule{{Devices: []Device{1, 2, 3, 1}, URL: ok}}, "device"},
		{"UK", []Rule{{Countries: []string{"UK"}, URL: ok}}, "country[0]"},
		{"lower-case country", []Rule{{Countries: []string{"us"}, URL: ok}}, "country[0]"},
		{"three letters", []Rule{{Countries: []string{"USA"}, URL: ok}}, "country[0]"},
		{"non-ASCII country", []Rule{{Countries: []string{"ÜS"}, URL: ok}}, "country[0]"},
		{"country twice", []Rule{{Countries: []string{"DE", "DE"}, URL: ok}}, "country[1]"},
		{"countries unsorted", []Rule{{Countries: []string{"US", "CA"}, URL: ok}}, "country[1]"},
		{"too many countries", []Rule{{Countries: slices.Repeat([]string{"US"}, MaxRuleCountries+1), URL: ok}}, "country"},
		{"unknown language", []Rule{{Languages: []string{"xx"}, URL: ok}}, "language[0]"},
		{"upper-case language", []Rule{{Languages: []string{"EN"}, URL: ok}}, "language[0]"},
		{"language tag", []Rule{{Languages: []string{"en-US"}, URL: ok}}, "language[0]"},
		{"non-ASCII language", []Rule{{Languages: []string{"ü"}, URL: ok}}, "language[0]"},
		{"empty param", []Rule{{Query: []QueryMatch{{}}, URL: ok}}, "query[0].param"},
		{"long param", []Rule{{Query: []QueryMatch{{Param: strings.Repeat("p", MaxQueryParamLen+1)}}, URL: ok}}, "query[0].param"},
		{"CRLF param", []Rule{{Query: []QueryMatch{{Param: "a\r\nb"}}, URL: ok}}, "query[0].param"},
		{"bad UTF-8 param", []Rule{{Query: []QueryMatch{{Param: "a\xffb"}}, URL: ok}}, "query[0].param"},
		{"C1 value", []Rule{{Query: []QueryMatch{{Param: "a", Equals: true, Value: "x\u0085"}}, URL: ok}}, "query[0].equals"},
		{"long value", []Rule{{Query: []QueryMatch{{Param: "a", Equals: true, Value: strings.Repeat("v", MaxQueryValueLen+1)}}, URL: ok}}, "query[0].equals"},
		{"value without equals", []Rule{{Query: []QueryMatch{{Param: "a", Value: "v"}}, URL: ok}}, "query[0]"},
		{"too many query", []Rule{{Query: slices.Repeat([]QueryMatch{{Param: "a"}}, MaxRuleQuery+1), URL: ok}}, "query"},
		{"no url", []Rule{{Devices: []Device{DeviceIOS}}}, "url"},
		{"javascript", []Rule{{Devices: []Device{DeviceIOS}, URL: "javascript:alert(1)"}}, "url"},
		{"CRLF url", []Rule{{Devices: []Device{DeviceIOS}, URL: "https://a.example/\r\nSet-Cookie: x=1"}}, "url"},
		{"space url", []Rule{{Devices: []Device{DeviceIOS}, URL: "https://a.example/a b"}}, "url"},
		{"long url", []Rule{{Devices: []Device{DeviceIOS}, URL: "https://a.example/" + strings.Repeat("a", MaxRuleURLLen)}}, "url"},
		{"second rule", []Rule{{Devices: []Device{DeviceIOS}, URL: ok}, {Languages: []string{"zz"}, URL: ok}}, "language[0]"},
	} {
		err := CheckRules(tc.rules)
		if !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: CheckRules = %v; want ErrInvalidInput", tc.name, err)
			continue
		}
		var re *RuleError
		if tc.field == "-" {
			if errors.As(err, &re) {
				t.Errorf("%s: a RuleError %v for the list as a whole", tc.name, err)
			}
			continue
		}
		if !errors.As(err, &re) || re.Field != tc.field {
			t.Errorf("%s: CheckRules = %v (%#v); want a RuleError on field %q", tc.name, err, re, tc.field)
		}
		if tc.name == "second rule" && re.Rule != 1 {
			t.Errorf("%s: the error names rule %d", tc.name, re.Rule)
		}
		if tc.name == "UK" && !strings.Contains(err.Error(), "GB") {
			t.Errorf("UK: %q does not say the United Kingdom is GB", err)
		}
	}
}

// TestCodeTables: every code the tables hold is a current code by
// golang.org/x/text's CLDR data, and the codes x/text knows that they
// lack are exactly the deprecated and exceptionally reserved ones, so a
// typo in the tables (a code dropped or invented) fails here.
func TestCodeTables(t *testing.T) {
	var extraCountries, extraLanguages []string
	for a := byte('A'); a <= 'Z'; a++ {
		for b := byte('A'); b <= 'Z'; b++ {
			s := string([]byte{a, b})
			r, err := language.ParseRegion(s)
			x := err == nil && r.IsCountry() && r.String() == s
			if isCountry(s) && !x {
				t.Errorf("country %s is not a current code for x/text", s)
			}
			if x && !isCountry(s) {
				extraCountries = append(extraCountries, s)
			}
			l := strings.ToLower(s)
			base, err := language.ParseBase(l)
			x = err == nil && base.String() == l
			if isLanguage(l) && !x {
				t.Errorf("language %s is not a code for x/text", l)
			}
			if x && !isLanguage(l) {
				extraLanguages = append(extraLanguages, l)
			}
		}
	}
	wantCountries := "AC AN BU CP CQ CS CT DD DG DY EA EZ FQ FX HV IC JT MI NH NQ NT PC PU PZ RH SU TA TP UK UN VD WK YD YU ZR"
	if got := strings.Join(extraCountries, " "); got != wantCountries {
		t.Errorf("codes x/text has that the country table lacks:\n%s\nwant the deprecated and reserved ones:\n%s", got, wantCountries)
	}
	if got, want := strings.Join(extraLanguages, " "), "bh in iw ji jw mo sh"; got != want {
		t.Errorf("codes x/text has that the language table lacks: %s; want the deprecated ones %s", got, want)
	}
	if n := strings.Count(countryCodes, " ") + 1; n != 250 {
		t.Errorf("%d country codes; want 249 and XK", n)
	}
	if n := strings.Count(languageCodes, " ") + 1; n != 183 {
		t.Errorf("%d language codes; want 183", n)
	}
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{{"us", "US", true}, {"Gb", "GB", true}, {"uk", "UK", false}, {"xk", "XK", true}, {"u", "", false}, {"usa", "", false}} {
		if got, ok := CanonicalCountry(tc.in); ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("CanonicalCountry(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{{"EN", "en", true}, {"pT", "pt", true}, {"iw", "iw", false}, {"eng", "", false}} {
		if got, ok := CanonicalLanguage(tc.in); ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("CanonicalLanguage(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDeviceNames(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Device
		ok   bool
	}{{"ios", DeviceIOS, true}, {"iOS", DeviceIOS, true}, {"ANDROID", DeviceAndroid, true}, {"desktop", DeviceDesktop, true}, {"mobile", 0, false}, {"", 0, false}} {
		if got, ok := ParseDevice(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("ParseDevice(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	b, err := DeviceAndroid.MarshalText()
	if err != nil || string(b) != "android" {
		t.Errorf("MarshalText = %q, %v", b, err)
	}
	var d Device
	if err := d.UnmarshalText([]byte("tv")); err == nil {
		t.Error("UnmarshalText(tv) succeeded")
	}
	if _, err := Device(7).MarshalText(); err == nil {
		t.Error("MarshalText of device 7 succeeded")
	}
}

func TestExtrasRoundTrip(t *testing.T) {
	for _, x := range []Extras{
		{},
		{MaxClicks: 1},
		{MaxClicks: MaxClicksLimit},
		{PasswordHash: testHash},
		{Rules: sampleRules()},
		{Rules: sampleRules(), PasswordHash: testHash, MaxClicks: 1000},
	} {
		b, err := AppendExtras([]byte("prefix"), &x)
		if err != nil {
			t.Fatalf("AppendExtras(%+v): %v", x, err)
		}
		if !bytes.HasPrefix(b, []byte("prefix")) {
			t.Fatalf("AppendExtras did not append: %q", b)
		}
		b = b[len("prefix"):]
		if x.IsZero() != (len(b) == 0) {
			t.Fatalf("extras %+v encode to %d bytes", x, len(b))
		}
		if err := CheckExtras(b); err != nil {
			t.Fatalf("CheckExtras(AppendExtras(%+v)): %v", x, err)
		}
		got, err := DecodeExtras(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(x, got); diff != "" {
			t.Errorf("DecodeExtras(AppendExtras(x)) (-want +got):\n%s", diff)
		}
		if got, err := DecodeExtras(string(b)); err != nil || !cmp.Equal(x, got) {
			t.Errorf("DecodeExtras of a string: %+v, %v", got, err)
		}
		rules, err := AppendRules(nil, x.Rules)
		if err != nil {
			t.Fatal(err)
		}
		composed, err := ComposeExtras(nil, rules, x.PasswordHash, x.MaxClicks)
		if err != nil || !bytes.Equal(composed, b) {
			t.Errorf("ComposeExtras = %x, %v; want AppendExtras' %x", composed, err, b)
		}
		back, err := DecodeRules(rules)
		if err != nil || !cmp.Equal(back, x.Rules) {
			t.Errorf("DecodeRules(AppendRules) = %+v, %v", back, err)
		}
		v := ViewExtras(b)
		if v.MaxClicks() != x.MaxClicks || string(v.PasswordHash()) != x.PasswordHash || v.HasRules() != (len(x.Rules) > 0) || v.IsZero() != x.IsZero() {
			t.Errorf("ViewExtras(%+v) = %d, %q, rules %v", x, v.MaxClicks(), v.PasswordHash(), v.HasRules())
		}
	}
}

func TestAppendExtrasRefuses(t *testing.T) {
	for _, x := range []Extras{
		{MaxClicks: -1},
		{MaxClicks: MaxClicksLimit + 1},
		{PasswordHash: "plaintext"},
		{PasswordHash: "$argon2id$" + strings.Repeat("a", MaxPasswordHash)},
		{PasswordHash: "$argon2id$v=19\n"},
		{Rules: []Rule{{URL: "https://a.example/"}}},
	} {
		if b, err := AppendExtras(nil, &x); !errors.Is(err, ErrInvalidInput) || len(b) != 0 {
			t.Errorf("AppendExtras(%+v) = %x, %v; want nothing and ErrInvalidInput", x, b, err)
		}
	}
	if _, err := ComposeExtras(nil, []byte{1, 0xff}, "", 0); err == nil {
		t.Error("ComposeExtras took malformed rules")
	}
}

// TestCheckExtrasRefuses: every cut of a valid encoding is refused, and so
// are the ways a corrupt or hostile one could be wrong.
func TestCheckExtrasRefuses(t *testing.T) {
	x := Extras{Rules: sampleRules(), PasswordHash: testHash, MaxClicks: 77}
	good, err := AppendExtras(nil, &x)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n < len(good); n++ {
		if err := CheckExtras(good[:n]); err == nil {
			t.Fatalf("CheckExtras took the first %d of %d bytes", n, len(good))
		}
	}
	rule := func(b ...byte) []byte { return append([]byte{extraRules, 1}, b...) }
	url := append([]byte{19}, "https://a.example/x"...)
	for name, b := range map[string][]byte{
		"lone zero flags":   {0},
		"unknown flag":      {0x08},
		"trailing":          append(slices.Clone(good), 0),
		"zero max clicks":   {extraMaxClicks, 0},
		"bad hash":          append([]byte{extraPassword, 3}, "abc"...),
		"zero rules":        {extraRules, 0},
		"17 rules":          {extraRules, 17},
		"no conditions":     rule(append([]byte{0}, url...)...),
		"unknown condition": rule(append([]byte{0x10}, url...)...),
		"device bit 0":      rule(append([]byte{condDevice, 1}, url...)...),
		"device bit 4":      rule(append([]byte{condDevice, 1 << 4}, url...)...),
		"empty device set":  rule(append([]byte{condDevice, 0}, url...)...),
		"UK":                rule(append([]byte{condCountry, 1, 'U', 'K'}, url...)...),
		"countries order":   rule(append([]byte{condCountry, 2, 'U', 'S', 'C', 'A'}, url...)...),
		"zero countries":    rule(append([]byte{condCountry, 0}, url...)...),
		"language case":     rule(append([]byte{condLanguage, 1, 'E', 'N'}, url...)...),
		"query kind 3":      rule(append([]byte{condQuery, 1, 3, 1, 'a'}, url...)...),
		"empty query name":  rule(append([]byte{condQuery, 1, 1, 0}, url...)...),
		"CR in query name":  rule(append([]byte{condQuery, 1, 1, 1, '\r'}, url...)...),
		"javascript target": rule(append([]byte{condDevice, 2, 11}, "javascript:"...)...),
		"CRLF target":       rule(append([]byte{condDevice, 2, 21}, "https://a.example/\r\nX"...)...),
		"huge length":       rule(condDevice, 2, 0xff, 0xff, 0xff, 0xff, 0x0f),
		"oversized":         append([]byte{extraRules}, make([]byte, MaxExtrasLen)...),
	} {
		if err := CheckExtras(b); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: CheckExtras(%x) = %v; want ErrInvalidInput", name, b, err)
		} else if strings.Contains(err.Error(), "https://") || strings.Contains(err.Error(), "$argon2id") {
			t.Errorf("%s: the error %q names a value", name, err)
		}
		if _, err := DecodeExtras(b); err == nil {
			t.Errorf("%s: DecodeExtras succeeded", name)
		}
	}
}

// queryArgs is a request's query as a map, for tests.
type queryArgs map[string][]string

func (q queryArgs) Has(name []byte) bool { _, ok := q[string(name)]; return ok }
func (q queryArgs) HasValue(name, value []byte) bool {
	for _, v := range q[string(name)] {
		if v == string(value) {
			return true
		}
	}
	return false
}

// matches is the reference semantics Route must agree with: every
// condition a rule sets holds, any value of a condition's list will do.
func (r *Rule) matches(f *Facts) bool {
	if len(r.Devices) > 0 && !slices.Contains(r.Devices, f.Device) {
		return false
	}
	if len(r.Countries) > 0 && !slices.Contains(r.Countries, string(f.Country[:])) {
		return false
	}
	if len(r.Languages) > 0 && !slices.Contains(r.Languages, string(f.Language[:])) {
		return false
	}
	for _, q := range r.Query {
		if f.Query == nil || (q.Equals && !f.Query.HasValue([]byte(q.Param), []byte(q.Value))) || (!q.Equals && !f.Query.Has([]byte(q.Param))) {
			return false
		}
	}
	return true
}

func reference(rules []Rule, f *Facts) (int, string) {
	for i := range rules {
		if rules[i].matches(f) {
			return i + 1, rules[i].URL
		}
	}
	return 0, ""
}

func TestRoute(t *testing.T) {
	rules := sampleRules()
	b, err := AppendExtras(nil, &Extras{Rules: rules, MaxClicks: 5})
	if err != nil {
		t.Fatal(err)
	}
	v := ViewExtras(b)
	for _, tc := range []struct {
		name string
		f    Facts
		want int
	}{
		{"nothing known", Facts{}, 0},
		{"iOS anywhere", Facts{Device: DeviceIOS, Country: [2]byte{'D', 'E'}}, 1},
		{"Android in Canada", Facts{Device: DeviceAndroid, Country: [2]byte{'C', 'A'}}, 2},
		{"Android in Germany", Facts{Device: DeviceAndroid, Country: [2]byte{'D', 'E'}}, 0},
		{"desktop in the US, German", Facts{Device: DeviceDesktop, Country: [2]byte{'U', 'S'}, Language: [2]byte{'d', 'e'}}, 2},
		{"unknown device, French", Facts{Language: [2]byte{'f', 'r'}}, 3},
		{"Android, unknown country", Facts{Device: DeviceAndroid}, 0},
		{"query, all present", Facts{Query: queryArgs{"beta": {""}, "utm_source": {"x", "news letter"}, "empty": {""}}}, 4},
		{"query, a value differs", Facts{Query: queryArgs{"beta": {"1"}, "utm_source": {"newsletter"}, "empty": {""}}}, 0},
		{"query, one missing", Facts{Query: queryArgs{"utm_source": {"news letter"}, "empty": {""}}}, 0},
		{"query, empty value not present", Facts{Query: queryArgs{"beta": {""}, "utm_source": {"news letter"}, "empty": {"x"}}}, 0},
	} {
		rule, target := v.Route(&tc.f)
		wantRule, wantURL := reference(rules, &tc.f)
		if rule != tc.want || rule != wantRule || string(target) != wantURL {
			t.Errorf("%s: Route = %d, %q; want %d (reference %d, %q)", tc.name, rule, target, tc.want, wantRule, wantURL)
		}
	}
	var none ExtrasView
	if rule, target := none.Route(&Facts{Device: DeviceIOS}); rule != 0 || target != nil {
		t.Errorf("Route without rules = %d, %q", rule, target)
	}
}

// TestRouteAllocs: evaluating rules on the hit path allocates nothing.
func TestRouteAllocs(t *testing.T) {
	b, err := AppendExtras(nil, &Extras{Rules: sampleRules(), PasswordHash: testHash, MaxClicks: 5})
	if err != nil {
		t.Fatal(err)
	}
	q := queryArgs{"beta": {""}, "utm_source": {"news letter"}, "empty": {""}}
	f := Facts{Device: DeviceDesktop, Country: [2]byte{'F', 'R'}, Language: [2]byte{'e', 's'}, Query: q}
	header := []byte("es-ES, en;q=0.8, *;q=0.1")
	var sink int
	n := testing.AllocsPerRun(200, func() {
		v := ViewExtras(b)
		rule, target := v.Route(&f)
		lang, _ := PrimaryLanguage(header)
		sink += rule + len(target) + int(lang[0]) + len(v.PasswordHash())
		if CheckExtras(b) != nil {
			sink++
		}
	})
	if n != 0 {
		t.Errorf("ViewExtras, Route, PrimaryLanguage and CheckExtras allocate %v times a call; want 0", n)
	}
	if sink == 0 {
		t.Fatal("nothing routed")
	}
}

func TestPrimaryLanguage(t *testing.T) {
	for _, tc := range []struct {
		h, want string
	}{
		{"", ""},
		{"en", "en"},
		{"en-US,en;q=0.9", "en"},
		{"de-CH, en;q=0.8", "de"},
		{"fr-CA", "fr"},
		{"FR-ca", "fr"},
		{"en;q=0.5, de;q=0.8", "de"},
		{"en;q=0.8, de;q=0.8", "en"},
		{"*, de;q=0.5", "de"},
		{"fil, de;q=0.1", "de"},
		{"zh-Hant-TW;q=0.7, ja;q=1.0", "ja"},
		{"en;q=0, de;q=0.001", "de"},
		{"en;q=0", ""},
		{"en;q=1.5, de;q=0.2", "de"},
		{"en;q=abc, de;q=0.2", "de"},
		{"en;q=0.12345, pt;q=0.1", "pt"},
		{"e, de", "de"},
		{"1a, de", "de"},
		{"  es  ;  q=0.9  ", "es"},
		{"日本語, en;q=0.1", "en"},
		{",,,;;;", ""},
		{"en_US", ""},
		{"en-, xx", "en"},
	} {
		lang, ok := PrimaryLanguage([]byte(tc.h))
		got := ""
		if ok {
			got = string(lang[:])
		}
		if got != tc.want {
			t.Errorf("PrimaryLanguage(%q) = %q; want %q", tc.h, got, tc.want)
		}
	}
}

// FuzzExtras: CheckExtras never panics; what it takes decodes, encodes back
// to the same bytes (one encoding per value), and Route over the bytes
// agrees with the reference semantics over the decoded rules. The view and
// Route never panic on any bytes, checked or not.
func FuzzExtras(f *testing.F) {
	for _, x := range []Extras{{Rules: sampleRules(), PasswordHash: testHash, MaxClicks: 3}, {MaxClicks: 1}, {Rules: sampleRules()[:1]}} {
		b, err := AppendExtras(nil, &x)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(1), "US", "en", "beta=1")
	}
	f.Add([]byte{extraRules, 1, condDevice, 2, 0}, uint8(0), "", "", "")
	f.Fuzz(func(t *testing.T, b []byte, device uint8, country, lang, query string) {
		facts := Facts{Device: Device(device % 5)}
		copy(facts.Country[:], country)
		copy(facts.Language[:], lang)
		if query != "" {
			q := queryArgs{}
			for kv := range strings.SplitSeq(query, "&") {
				k, val, _ := strings.Cut(kv, "=")
				q[k] = append(q[k], val)
			}
			facts.Query = q
		}
		v := ViewExtras(b)
		v.Route(&facts) // never panics
		x, err := DecodeExtras(b)
		if err != nil {
			return
		}
		again, err := AppendExtras(nil, &x)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("extras %x decode to %+v, which encode to %x, %v", b, x, again, err)
		}
		rule, target := v.Route(&facts)
		wantRule, wantURL := reference(x.Rules, &facts)
		if rule != wantRule || string(target) != wantURL {
			t.Fatalf("Route = %d, %q; reference %d, %q (rules %+v, facts %+v)", rule, target, wantRule, wantURL, x.Rules, facts)
		}
		if v.MaxClicks() != x.MaxClicks || string(v.PasswordHash()) != x.PasswordHash {
			t.Fatalf("view %d %q; decoded %d %q", v.MaxClicks(), v.PasswordHash(), x.MaxClicks, x.PasswordHash)
		}
	})
}

func ExampleExtrasView_Route() {
	b, _ := AppendExtras(nil, &Extras{Rules: []Rule{
		{Devices: []Device{DeviceIOS}, URL: "https://apps.apple.com/app/id1"},
		{Devices: []Device{DeviceAndroid}, URL: "https://play.google.com/store/apps/details?id=x"},
	}})
	v := ViewExtras(b)
	for _, d := range []Device{DeviceAndroid, DeviceDesktop} {
		rule, target := v.Route(&Facts{Device: d})
		fmt.Println(d, rule, string(target))
	}
	// Output:
	// android 2 https://play.google.com/store/apps/details?id=x
	// desktop 0
}
