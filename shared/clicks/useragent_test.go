package clicks

import "testing"

// uaCorpus is real User-Agents (from browsers, apps, crawlers and HTTP
// libraries as they send them) with what ParseUserAgent must say of each.
// The order-sensitive cases are the point: Edge, Opera, Samsung Internet
// and Yandex say Chrome; Chrome says Safari; in-app browsers say both;
// iOS says "like Mac OS X"; Android and ChromeOS say Linux; Windows Phone
// and HarmonyOS say Android.
var uaCorpus = []struct {
	ua      string
	device  Device
	bot     bool
	browser Browser
	os      OS
}{
	// Desktop.
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", DeviceDesktop, false, BrowserChrome, OSWindows},
	{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15", DeviceDesktop, false, BrowserSafari, OSMacOS},
	{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", DeviceDesktop, false, BrowserChrome, OSMacOS},
	{"Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0", DeviceDesktop, false, BrowserFirefox, OSLinux},
	{"Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:109.0) Gecko/20100101 Firefox/115.0", DeviceDesktop, false, BrowserFirefox, OSLinux},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0", DeviceDesktop, false, BrowserFirefox, OSWindows},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.51", DeviceDesktop, false, BrowserEdge, OSWindows},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/70.0.3538.102 Safari/537.36 Edge/18.19582", DeviceDesktop, false, BrowserEdge, OSWindows},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/123.0.0.0 Safari/537.36 OPR/109.0.0.0", DeviceDesktop, false, BrowserOpera, OSWindows},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/122.0.0.0 YaBrowser/24.4.0.0 Safari/537.36", DeviceDesktop, false, BrowserYandex, OSWindows},
	{"Mozilla/5.0 (Windows NT 10.0; WOW64; Trident/7.0; rv:11.0) like Gecko", DeviceDesktop, false, BrowserIE, OSWindows},
	{"Mozilla/5.0 (compatible; MSIE 10.0; Windows NT 6.1; Trident/6.0)", DeviceDesktop, false, BrowserIE, OSWindows},
	{"Opera/9.80 (Windows NT 6.1; WOW64) Presto/2.12.388 Version/12.18", DeviceDesktop, false, BrowserOpera, OSWindows},
	{"Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", DeviceDesktop, false, BrowserChrome, OSChromeOS},
	{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", DeviceDesktop, false, BrowserChrome, OSLinux},
	{"Mozilla/5.0 (X11; FreeBSD amd64; rv:124.0) Gecko/20100101 Firefox/124.0", DeviceDesktop, false, BrowserFirefox, OSOther},
	// Mobile and tablet.
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", DeviceMobile, false, BrowserSafari, OSIOS},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/124.0.6367.88 Mobile/15E148 Safari/604.1", DeviceMobile, false, BrowserChrome, OSIOS},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/125.0 Mobile/15E148 Safari/605.1.15", DeviceMobile, false, BrowserFirefox, OSIOS},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 EdgiOS/124.2478.50 Mobile/15E148 Safari/605.1.15", DeviceMobile, false, BrowserEdge, OSIOS},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) OPiOS/16.0.15.124050 Mobile/15E148 Safari/9537.53", DeviceMobile, false, BrowserOpera, OSIOS},
	{"Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", DeviceTablet, false, BrowserSafari, OSIPadOS},
	{"Mozilla/5.0 (iPod touch; CPU iPhone OS 15_7 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/15.6 Mobile/15E148 Safari/604.1", DeviceMobile, false, BrowserSafari, OSIOS},
	{"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36", DeviceMobile, false, BrowserChrome, OSAndroid},
	{"Mozilla/5.0 (Linux; Android 13; SM-X200) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", DeviceTablet, false, BrowserChrome, OSAndroid},
	{"Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/24.0 Chrome/117.0.0.0 Mobile Safari/537.36", DeviceMobile, false, BrowserSamsung, OSAndroid},
	{"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36 EdgA/124.0.2478.50", DeviceMobile, false, BrowserEdge, OSAndroid},
	{"Mozilla/5.0 (Linux; Android 10; VOG-L29) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36 OPR/79.0.4195.76546", DeviceMobile, false, BrowserOpera, OSAndroid},
	{"Mozilla/5.0 (Android 14; Mobile; rv:125.0) Gecko/125.0 Firefox/125.0", DeviceMobile, false, BrowserFirefox, OSAndroid},
	{"Mozilla/5.0 (Linux; U; Android 10; en-US; RMX1911 Build/QKQ1.200209.002) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/78.0.3904.108 UCBrowser/13.4.0.1306 Mobile Safari/537.36", DeviceMobile, false, BrowserUC, OSAndroid},
	{"Opera/9.80 (Android; Opera Mini/36.2.2254/119.132; U; id) Presto/2.12.423 Version/12.16", DeviceMobile, false, BrowserOpera, OSAndroid},
	{"Mozilla/5.0 (Linux; U; Android 4.0.3; ko-kr; LG-L160L Build/IML74K) AppleWebkit/534.30 (KHTML, like Gecko) Version/4.0 Mobile Safari/534.30", DeviceMobile, false, BrowserOther, OSAndroid},
	{"Mozilla/5.0 (Windows Phone 10.0; Android 6.0.1; Microsoft; Lumia 950) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/52.0.2743.116 Mobile Safari/537.36 Edge/15.15063", DeviceMobile, false, BrowserEdge, OSOther},
	{"Mozilla/5.0 (compatible; MSIE 10.0; Windows Phone 8.0; Trident/6.0; IEMobile/10.0; ARM; Touch; NOKIA; Lumia 920)", DeviceMobile, false, BrowserIE, OSOther},
	{"Mozilla/5.0 (Linux; Android 10; HarmonyOS; ELS-AN00; HMSCore 6.13.0.302) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/99.0.4844.88 HuaweiBrowser/14.0.5.302 Mobile Safari/537.36", DeviceMobile, false, BrowserChrome, OSHarmonyOS},
	{"Mozilla/5.0 (Phone; OpenHarmony 4.1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/114.0.0.0 Safari/537.36 ArkWeb/4.1.6.1 Mobile HuaweiBrowser/5.0.4.300", DeviceMobile, false, BrowserChrome, OSHarmonyOS},
	{"Mozilla/5.0 (Linux; Android 11; KFTRWI) AppleWebKit/537.36 (KHTML, like Gecko) Silk/124.3.6 like Chrome/124.0.6367.219 Safari/537.36", DeviceTablet, false, BrowserChrome, OSAndroid},
	// In-app browsers: a class.
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/21E219 [FBAN/FBIOS;FBAV/455.0.0.44.107;FBBV/577357423;FBDV/iPhone14,5;FBMD/iPhone;FBSN/iOS;FBSV/17.4]", DeviceMobile, false, BrowserInApp, OSIOS},
	{"Mozilla/5.0 (Linux; Android 14; SM-S918B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/123.0.6312.118 Mobile Safari/537.36 [FB_IAB/FB4A;FBAV/459.0.0.48.109;]", DeviceMobile, false, BrowserInApp, OSAndroid},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 325.0.1.23.105 (iPhone14,5; iOS 17_4; en_US; en; scale=3.00; 1170x2532; 585010405)", DeviceMobile, false, BrowserInApp, OSIOS},
	{"Mozilla/5.0 (Linux; Android 14; SM-S918B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/123.0.6312.118 Mobile Safari/537.36 Instagram 325.0.0.35.91 Android (34/14; 450dpi)", DeviceMobile, false, BrowserInApp, OSAndroid},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 musical_ly_34.1.0 JsSdk/2.0 NetType/WIFI Channel/App Store ByteLocale/en Region/US", DeviceMobile, false, BrowserInApp, OSIOS},
	{"Mozilla/5.0 (Linux; Android 10; V1914A Build/QP1A.190711.020; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/86.0.4240.99 XWEB/3195 MMWEBSDK/20211001 Mobile Safari/537.36 MMWEBID/2585 MicroMessenger/8.0.16.2040(0x28001053)", DeviceMobile, false, BrowserInApp, OSAndroid},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 MicroMessenger/8.0.42(0x18002a2a) NetType/WIFI Language/zh_CN", DeviceMobile, false, BrowserInApp, OSIOS},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Safari Line/14.5.0", DeviceMobile, false, BrowserInApp, OSIOS},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Snapchat/13.2.0.42 (like Safari/8617.2.4.10.8, panda)", DeviceMobile, false, BrowserInApp, OSIOS},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) GSA/311.0.622470346 Mobile/15E148 Safari/604.1", DeviceMobile, false, BrowserInApp, OSIOS},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148", DeviceMobile, false, BrowserInApp, OSIOS},
	{"Mozilla/5.0 (Linux; Android 13; Pixel 7 Build/TQ3A.230901.001; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/117.0.0.0 Mobile Safari/537.36", DeviceMobile, false, BrowserInApp, OSAndroid},
	// TVs and consoles.
	{"Mozilla/5.0 (SMART-TV; LINUX; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) 76.0.3809.146/6.0 TV Safari/537.36", DeviceTV, false, BrowserOther, OSOther},
	{"Mozilla/5.0 (Web0S; Linux/SmartTV) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/79.0.3945.79 Safari/537.36 WebAppManager", DeviceTV, false, BrowserChrome, OSOther},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64; Xbox; Xbox One) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/116.0.0.0 Safari/537.36 Edge/44.18363.8131", DeviceTV, false, BrowserEdge, OSWindows},
	{"Mozilla/5.0 (PlayStation; PlayStation 5/2.26) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.0 Safari/605.1.15", DeviceTV, false, BrowserOther, OSOther},
	// Bots keep what they claim.
	{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", DeviceUnknown, true, BrowserOther, OSOther},
	{"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", DeviceMobile, true, BrowserChrome, OSAndroid},
	{"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", DeviceUnknown, true, BrowserOther, OSOther},
	{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)", DeviceDesktop, true, BrowserSafari, OSMacOS},
	{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/124.0.6367.60 Safari/537.36", DeviceDesktop, true, BrowserChrome, OSLinux},
	{"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", DeviceUnknown, true, BrowserOther, OSOther},
	{"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", DeviceUnknown, true, BrowserOther, OSOther},
	{"Twitterbot/1.0", DeviceUnknown, true, BrowserOther, OSOther},
	{"WhatsApp/2.23.20.0", DeviceUnknown, true, BrowserOther, OSOther},
	{"TelegramBot (like TwitterBot)", DeviceUnknown, true, BrowserOther, OSOther},
	{"curl/8.5.0", DeviceUnknown, true, BrowserOther, OSOther},
	{"Go-http-client/1.1", DeviceUnknown, true, BrowserOther, OSOther},
	{"python-requests/2.31.0", DeviceUnknown, true, BrowserOther, OSOther},
	{"", DeviceUnknown, true, BrowserUnknown, OSUnknown},
	{"SomethingNew/1.0", DeviceUnknown, false, BrowserOther, OSOther},
	{"Microsoft Office/16.0 (Windows NT 10.0; Microsoft Outlook 16.0.17328; Pro)", DeviceDesktop, false, BrowserOther, OSWindows},
}

func TestParseUserAgent(t *testing.T) {
	for _, tt := range uaCorpus {
		got := ParseUserAgent([]byte(tt.ua))
		want := Agent{Device: tt.device, Bot: tt.bot, Browser: tt.browser, OS: tt.os}
		if got != want {
			t.Errorf("ParseUserAgent(%q)\n got %v %v %v bot=%v\nwant %v %v %v bot=%v", tt.ua,
				got.Device, got.Browser, got.OS, got.Bot, want.Device, want.Browser, want.OS, want.Bot)
		}
		if d, bot := Classify([]byte(tt.ua)); d != tt.device || bot != tt.bot {
			t.Errorf("Classify(%q) = %v, %v; want %v, %v", tt.ua, d, bot, tt.device, tt.bot)
		}
	}
}

// TestParseUserAgentLooksAtTheFirstBytesOnly: a token past MaxUserAgentLen
// is not seen (the edge keeps no more), and case does not matter.
func TestParseUserAgentLooksAtTheFirstBytesOnly(t *testing.T) {
	pad := make([]byte, MaxUserAgentLen-len("firefox/"))
	for i := range pad {
		pad[i] = 'x'
	}
	if a := ParseUserAgent(append(append([]byte{}, pad...), "FIREFOX/1"...)); a.Browser != BrowserFirefox {
		t.Fatalf("a token ending at the last byte looked at: %v", a.Browser)
	}
	if a := ParseUserAgent(append(append([]byte{}, pad...), "xFirefox/1"...)); a.Browser != BrowserOther {
		t.Fatalf("a token ending a byte past it: %v", a.Browser)
	}
}

// TestNames: every class has a distinct, stable name; out-of-range values
// read as unknown.
func TestNames(t *testing.T) {
	for _, names := range [][]string{DeviceNames(), BrowserNames(), OSNames()} {
		seen := map[string]bool{}
		for _, n := range names {
			if n == "" || seen[n] {
				t.Fatalf("names %q: empty or repeated %q", names, n)
			}
			seen[n] = true
		}
		if names[0] != "unknown" {
			t.Fatalf("names %q: 0 must be unknown", names)
		}
	}
	if numBrowsers.String() != "unknown" || numOSes.String() != "unknown" || numDevices.String() != "unknown" {
		t.Fatal("an out-of-range class has a name")
	}
	if BrowserSamsung.String() != "samsung-internet" || OSIPadOS.String() != "ipados" || BrowserInApp.String() != "in-app" {
		t.Fatal("names changed: they are stored by rollups")
	}
}

// FuzzParseUserAgent: any bytes classify into known classes without
// panicking, the same as their first MaxUserAgentLen bytes and their
// upper-cased form do.
func FuzzParseUserAgent(f *testing.F) {
	for _, tt := range uaCorpus {
		f.Add([]byte(tt.ua))
	}
	f.Fuzz(func(t *testing.T, ua []byte) {
		a := ParseUserAgent(ua)
		if a.Device >= numDevices || a.Browser >= numBrowsers || a.OS >= numOSes {
			t.Fatalf("ParseUserAgent(%q) = %+v: out of range", ua, a)
		}
		if (len(ua) == 0) != (a.Browser == BrowserUnknown) || (len(ua) == 0) != (a.OS == OSUnknown) {
			t.Fatalf("ParseUserAgent(%q) = %+v: unknown is for an empty UA only", ua, a)
		}
		if len(ua) > MaxUserAgentLen {
			if b := ParseUserAgent(ua[:MaxUserAgentLen]); b != a {
				t.Fatalf("ParseUserAgent(%q) = %+v, of its first %d bytes %+v", ua, a, MaxUserAgentLen, b)
			}
		}
		up := make([]byte, len(ua))
		for i, c := range ua {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			up[i] = c
		}
		if b := ParseUserAgent(up); b != a {
			t.Fatalf("ParseUserAgent(%q) = %+v, upper-cased %+v", ua, a, b)
		}
	})
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
	if n := testing.AllocsPerRun(100, func() { ParseUserAgent(ua); ReferrerHost(buf[:], ref) }); n != 0 {
		t.Fatalf("allocated %v times", n)
	}
	for _, tt := range uaCorpus {
		ua := []byte(tt.ua)
		if n := testing.AllocsPerRun(10, func() { ParseUserAgent(ua) }); n != 0 {
			t.Fatalf("ParseUserAgent(%q) allocated %v times", ua, n)
		}
	}
}

func BenchmarkClassify(b *testing.B) {
	ua := []byte("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36")
	b.ReportAllocs()
	for b.Loop() {
		Classify(ua)
	}
}

// BenchmarkParseUserAgent classifies every UA of the corpus in turn:
// ns/op is per User-Agent, averaged over desktop, mobile, in-app and bots.
func BenchmarkParseUserAgent(b *testing.B) {
	uas := make([][]byte, len(uaCorpus))
	for i, tt := range uaCorpus {
		uas[i] = []byte(tt.ua)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ParseUserAgent(uas[i])
		if i++; i == len(uas) {
			i = 0
		}
	}
}
