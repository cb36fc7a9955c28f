package link

import "testing"

// TestNeeds: a view's needs are the union of its rules' conditions, none
// for a link without rules, and asking allocates nothing.
func TestNeeds(t *testing.T) {
	ios := Rule{Devices: []Device{DeviceIOS}, URL: "https://apps.example.com/ios"}
	de := Rule{Countries: []string{"AT", "DE"}, URL: "https://example.de/"}
	fr := Rule{Languages: []string{"fr"}, URL: "https://example.fr/"}
	q := Rule{Query: []QueryMatch{{Param: "ref", Equals: true, Value: "mail"}}, URL: "https://example.com/mail"}
	both := Rule{Devices: []Device{DeviceAndroid}, Countries: []string{"US"}, URL: "https://example.com/us-android"}
	tests := []struct {
		name  string
		rules []Rule
		want  Needs
	}{
		{"none", nil, 0},
		{"device", []Rule{ios}, NeedsDevice},
		{"country", []Rule{de}, NeedsCountry},
		{"language", []Rule{fr}, NeedsLanguage},
		{"query", []Rule{q}, NeedsQuery},
		{"device and country in one rule", []Rule{both}, NeedsDevice | NeedsCountry},
		{"all, across rules", []Rule{ios, de, fr, q}, NeedsDevice | NeedsCountry | NeedsLanguage | NeedsQuery},
	}
	for _, tt := range tests {
		b, err := AppendExtras(nil, &Extras{Rules: tt.rules, MaxClicks: 5})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		v := ViewExtras(b)
		if got := v.Needs(); got != tt.want {
			t.Errorf("%s: needs %08b, want %08b", tt.name, got, tt.want)
		}
		if !v.Needs().Has(tt.want) || (tt.want != 0 && v.Needs().Has(tt.want|Needs(0x80))) {
			t.Errorf("%s: Has is not a subset test", tt.name)
		}
		if n := testing.AllocsPerRun(100, func() { _ = v.Needs() }); n != 0 {
			t.Errorf("%s: Needs allocated %v times", tt.name, n)
		}
	}
}
