package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/shared/passhash"
)

// TestLinksRulesCommands: links create takes rules (compact and as JSON),
// a password from a file and a click limit; links get shows them; links
// set replaces and removes each; bad flags are usage errors and the API's
// refusals name the rule and field.
func TestLinksRulesCommands(t *testing.T) {
	url, key, pool := apiServer(t)
	env := map[string]string{"EDGELINK_API_KEY": key, "EDGELINK_DATABASE_URL": ""}
	cli := func(args ...string) (string, error) {
		t.Helper()
		out, _, err := runCLIEnv(t, env, append([]string{"links", "--api-url", url}, args...)...)
		return out, err
	}
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret words\r\nignored second line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := cli("--json", "create", "https://example.com/app", "--code", "app-link",
		"--rule", "device=ios => https://apps.apple.com/app/id1",
		"--rule", "device=android,desktop country=us,CA language=EN query=ref=mail query=beta => https://example.com/na",
		"--password-file", pwFile, "--max-clicks", "50")
	if err != nil {
		t.Fatal(err)
	}
	var l apiwire.Link
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("--json printed %q: %v", out, err)
	}
	mail := "mail"
	want := []apiwire.Rule{
		{URL: "https://apps.apple.com/app/id1", Device: []string{"ios"}},
		{URL: "https://example.com/na", Device: []string{"android", "desktop"}, Country: []string{"CA", "US"}, Language: []string{"en"},
			Query: []apiwire.QueryCondition{{Param: "ref", Equals: &mail}, {Param: "beta"}}},
	}
	if diff := cmp.Diff(want, l.Rules); diff != "" || !l.PasswordProtected || l.MaxClicks == nil || *l.MaxClicks != 50 {
		t.Fatalf("created (-want +got rules):\n%s\n%+v", diff, l)
	}
	var hash string
	if err := pool.QueryRow(context.Background(), `SELECT password_hash FROM links WHERE code = 'app-link'`).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if ok, _ := passhash.Verify(hash, []byte("s3cret words")); !ok {
		t.Error("the password is not the file's first line without its line end")
	}

	out, err = cli("get", "app-link")
	for _, s := range []string{"rule 1         device=ios => https://apps.apple.com/app/id1",
		"rule 2         device=android,desktop country=CA,US language=en query=ref=mail query=beta => https://example.com/na",
		"password       yes", "max_clicks     50"} {
		if err != nil || !strings.Contains(out, s) {
			t.Errorf("get: %q does not show %q (%v)", out, s, err)
		}
	}

	rulesFile := filepath.Join(dir, "rules.json")
	if err := os.WriteFile(rulesFile, []byte(`[{"url": "https://example.com/fr", "language": ["fr"], "query": [{"param": "q", "equals": "a b"}]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = cli("--json", "set", "app-link", "--rules-file", rulesFile, "--no-password", "--no-max-clicks")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Rules) != 1 || l.Rules[0].Language[0] != "fr" || l.PasswordProtected || l.MaxClicks != nil {
		t.Fatalf("after set: %s (%v)", out, err)
	}
	out, err = cli("--json", "set", "app-link", "--no-rules", "--max-clicks", "3")
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Rules) != 0 || l.MaxClicks == nil || *l.MaxClicks != 3 {
		t.Fatalf("after --no-rules: %s (%v)", out, err)
	}

	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		want  string
		usage bool
	}{
		{[]string{"create", "https://example.com/", "--rule", "device=ios https://x.example/"}, "want CONDITIONS => URL", true},
		{[]string{"create", "https://example.com/", "--rule", "os=ios => https://x.example/"}, `unknown condition "os"`, true},
		{[]string{"create", "https://example.com/", "--rule", "=> https://x.example/"}, "at least one condition", true},
		{[]string{"create", "https://example.com/", "--rule", "device=ios => https://x.example/", "--rules-file", rulesFile}, "not both", true},
		{[]string{"create", "https://example.com/", "--password-file", empty}, "first line is empty", true},
		{[]string{"create", "https://example.com/", "--password-file", filepath.Join(dir, "missing")}, "--password-file", true},
		{[]string{"create", "https://example.com/", "--rules-file", pwFile}, "not a JSON array of rules", true},
		{[]string{"set", "app-link"}, "nothing to change", true},
		{[]string{"set", "app-link", "--no-rules", "--rule", "device=ios => https://x.example/"}, "not both", true},
		{[]string{"set", "app-link", "--no-max-clicks", "--max-clicks", "4"}, "not both", true},
		{[]string{"create", "https://example.com/", "--rule", "device=ios => javascript:alert(1)"}, "400 Bad Request: rules[0].url: scheme must be http or https", false},
		{[]string{"create", "https://example.com/", "--rule", "country=uk => https://x.example/"}, "the United Kingdom is GB", false},
		{[]string{"create", "https://example.com/", "--max-clicks=-1"}, "max_clicks must be at least 1", false},
	} {
		_, err := cli(tc.args...)
		var ue usageError
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.As(err, &ue) != tc.usage {
			t.Errorf("%v: %v (usage error %v); want an error with %q (usage %v)", tc.args, err, errors.As(err, &ue), tc.want, tc.usage)
		}
	}
}

// TestParseRuleRoundTrip: what formatRule prints, parseRule reads back.
func TestParseRuleRoundTrip(t *testing.T) {
	v := "x=y"
	for _, r := range []apiwire.Rule{
		{URL: "https://a.example/?x=1&y=2", Device: []string{"ios"}},
		{URL: "https://a.example/", Country: []string{"DE", "FR"}, Language: []string{"de"}, Query: []apiwire.QueryCondition{{Param: "p", Equals: &v}, {Param: "q"}}},
	} {
		got, err := parseRule(formatRule(r))
		if err != nil || !cmp.Equal(got, r) {
			t.Errorf("parseRule(formatRule(%+v)) = %+v, %v", r, got, err)
		}
	}
}
