package clicks

import "testing"

func TestClassify(t *testing.T) {
	tests := []struct {
		ua     string
		device Device
		bot    bool
	}{
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", DeviceDesktop, false},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15", DeviceDesktop, false},
		{"Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0", DeviceDesktop, false},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", DeviceMobile, false},
		{"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36", DeviceMobile, false},
		{"Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", DeviceTablet, false},
		{"Mozilla/5.0 (Linux; Android 13; SM-X200) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", DeviceTablet, false},
		{"Mozilla/5.0 (SMART-TV; LINUX; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) 76.0.3809.146/6.0 TV Safari/537.36", DeviceTV, false},
		{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", DeviceUnknown, true},
		{"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", DeviceMobile, true},
		{"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", DeviceUnknown, true},
		{"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", DeviceUnknown, true},
		{"WhatsApp/2.23.20.0", DeviceUnknown, true},
		{"curl/8.5.0", DeviceUnknown, true},
		{"Go-http-client/1.1", DeviceUnknown, true},
		{"", DeviceUnknown, true},
		{"SomethingNew/1.0", DeviceUnknown, false},
	}
	for _, tt := range tests {
		d, bot := Classify([]byte(tt.ua))
		if d != tt.device || bot != tt.bot {
			t.Errorf("Classify(%q) = %v, %v; want %v, %v", tt.ua, d, bot, tt.device, tt.bot)
		}
	}
}

func TestReferrerHost(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"https://t.co/abc?x=1", "t.co"},
		{"https://News.YCombinator.com/item?id=1", "news.ycombinator.com"},
		{"http://user:pass@example.com:8080/path#frag", "example.com"},
		{"https://example.com.", "example.com"},
		{"https://[2001:db8::1]:443/x", "[2001:db8::1]"},
		{"android-app://com.google.android.gm/", "com.google.android.gm"},
		{"example.com/no-scheme", ""},
		{"https:///nohost", ""},
		{"javascript:alert(1)", ""},
		{"https://" + string(make([]byte, 10)) + "/", "??????????"},
		{"https://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example/", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
	}
	var buf [MaxReferrerLen]byte
	for _, tt := range tests {
		if got := string(ReferrerHost(buf[:], []byte(tt.in))); got != tt.want {
			t.Errorf("ReferrerHost(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestClassifyDoesNotAllocate(t *testing.T) {
	ua := []byte("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1")
	ref := []byte("https://t.co/abc")
	var buf [MaxReferrerLen]byte
	if n := testing.AllocsPerRun(100, func() { Classify(ua); ReferrerHost(buf[:], ref) }); n != 0 {
		t.Fatalf("allocated %v times", n)
	}
}

func BenchmarkClassify(b *testing.B) {
	ua := []byte("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36")
	b.ReportAllocs()
	for b.Loop() {
		Classify(ua)
	}
}
