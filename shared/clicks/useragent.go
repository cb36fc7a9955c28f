package clicks

// Device is the class of device a click came from, derived from its
// User-Agent by ParseUserAgent.
type Device uint8

// Device classes. The numbers are on the wire: only append.
const (
	DeviceUnknown Device = iota // no or unrecognised User-Agent
	DeviceDesktop
	DeviceMobile
	DeviceTablet
	DeviceTV
	numDevices
)

var deviceNames = [numDevices]string{"unknown", "desktop", "mobile", "tablet", "tv"}

// String is the class's name as stored and reported.
func (d Device) String() string {
	if d >= numDevices {
		return "unknown"
	}
	return deviceNames[d]
}

// DeviceNames lists every class name, for documentation and validation.
func DeviceNames() []string { return append([]string(nil), deviceNames[:]...) }

// Browser is the family of browser a click came from, derived from its
// User-Agent by ParseUserAgent. "unknown" is a click without a User-Agent
// (or from before format 5); "other" a User-Agent naming none of the
// families.
type Browser uint8

// Browser families. The numbers are on the wire: only append.
const (
	BrowserUnknown Browser = iota
	BrowserOther
	BrowserChrome
	BrowserSafari
	BrowserFirefox
	BrowserEdge
	BrowserOpera
	BrowserSamsung
	// BrowserInApp is an app's embedded browser (Facebook, Instagram,
	// TikTok, WeChat, LINE, Snapchat, an Android WebView, an iOS web view
	// that is not Safari...): a class, not a browser, since the app
	// matters more than the engine beneath it.
	BrowserInApp
	BrowserIE
	BrowserYandex
	BrowserUC
	numBrowsers
)

var browserNames = [numBrowsers]string{"unknown", "other", "chrome", "safari", "firefox", "edge", "opera",
	"samsung-internet", "in-app", "ie", "yandex", "uc"}

// String is the family's name as stored and reported.
func (b Browser) String() string {
	if b >= numBrowsers {
		return "unknown"
	}
	return browserNames[b]
}

// BrowserNames lists every family name, for documentation and validation.
func BrowserNames() []string { return append([]string(nil), browserNames[:]...) }

// OS is the operating system family a click came from, derived from its
// User-Agent by ParseUserAgent; "unknown" and "other" as for Browser.
type OS uint8

// OS families. The numbers are on the wire: only append.
const (
	OSUnknown OS = iota
	OSOther
	OSWindows
	OSMacOS
	OSIOS
	// OSIPadOS is an iPad that says so. Safari on iPadOS 13 and later
	// asks for desktop sites by default, with a Mac's User-Agent: those
	// clicks count as macOS, and no User-Agent rule can tell them apart.
	OSIPadOS
	OSAndroid
	OSLinux
	OSChromeOS
	OSHarmonyOS
	numOSes
)

var osNames = [numOSes]string{"unknown", "other", "windows", "macos", "ios", "ipados", "android", "linux",
	"chromeos", "harmonyos"}

// String is the family's name as stored and reported.
func (o OS) String() string {
	if o >= numOSes {
		return "unknown"
	}
	return osNames[o]
}

// OSNames lists every family name, for documentation and validation.
func OSNames() []string { return append([]string(nil), osNames[:]...) }

// MaxUserAgentLen is how much of a User-Agent ParseUserAgent looks at (and
// so how much an edge keeps per click). Every token below sits inside the
// first 256 bytes of the User-Agents that carry it, except some in-app
// browsers' app names past a long device model on Android, whose "; wv)"
// (a WebView) comes first. (It was 160 until issue 22: Android phones'
// "Mobile" comes after the model, build and engine versions, past byte 160
// in many in-app, UC and HarmonyOS User-Agents, which then counted as
// tablets.)
const MaxUserAgentLen = 256

// botTokens mark automated clients: crawlers, link unfurlers (chat apps
// fetch a link to preview it, which is not a person clicking), monitoring
// and HTTP libraries. Matched case-insensitively anywhere in the
// User-Agent; "bot", "crawl" and "spider" catch most of the long tail.
var botTokens = []string{
	"bot", "crawl", "spider", "slurp", "facebookexternalhit", "facebookcatalog",
	"whatsapp", "telegram", "skypeuripreview", "embedly", "quora link preview",
	"bitlybot", "vkshare", "pinterest", "redditbot", "applebot", "bingpreview",
	"headlesschrome", "phantomjs", "lighthouse", "pingdom", "uptimerobot",
	"curl/", "wget/", "python-requests", "python-urllib", "aiohttp", "go-http-client",
	"java/", "okhttp", "apache-httpclient", "libwww-perl", "node-fetch", "axios/",
	"httpx", "scrapy", "postmanruntime", "insomnia", "feedfetcher", "mediapartners",
}

// deviceRules decide the class: the first rule whose token appears wins,
// so the order matters (an iPad's UA says "Mobile" too; Android tablets
// lack "mobile"; a TV's UA often says "Linux").
var deviceRules = []rule[Device]{
	{"ipad", DeviceTablet},
	{"tablet", DeviceTablet},
	{"kindle", DeviceTablet},
	{"silk/", DeviceTablet},
	{"playbook", DeviceTablet},
	{"smart-tv", DeviceTV},
	{"smarttv", DeviceTV},
	{"googletv", DeviceTV},
	{"appletv", DeviceTV},
	{"crkey", DeviceTV},
	{"roku", DeviceTV},
	{"hbbtv", DeviceTV},
	{"tizen", DeviceTV},
	{"web0s", DeviceTV},
	{"playstation", DeviceTV},
	{"xbox", DeviceTV},
	{"nintendo", DeviceTV},
	{"mobile", DeviceMobile},
	{"iphone", DeviceMobile},
	{"ipod", DeviceMobile},
	{"opera mini", DeviceMobile}, // says "Android" and not "mobile"
	{"android", DeviceTablet},    // Android without "mobile": a tablet, by Google's own UA rules
	{"windows phone", DeviceMobile},
	{"blackberry", DeviceMobile},
	{"windows", DeviceDesktop},
	{"macintosh", DeviceDesktop},
	{"mac os x", DeviceDesktop},
	{"cros", DeviceDesktop},
	{"x11", DeviceDesktop},
	{"linux", DeviceDesktop},
}

// browserWebKit is a browser rule's result only: a WebKit User-Agent that
// named no browser, resolved after the pass (an in-app web view on iOS,
// else other). Never on the wire.
const browserWebKit = numBrowsers

// browserRules decide the family: the first rule whose token appears wins.
// Browsers built on another one name it too, so they come before it: every
// in-app browser names its engine's browser; Edge, Opera, Samsung
// Internet, Yandex and UC say "Chrome/"; Chrome and Firefox on iOS say
// "Safari/"; Chrome says "Safari/" everywhere.
var browserRules = []rule[Browser]{
	{"fban/", BrowserInApp}, // Facebook (iOS)
	{"fbav/", BrowserInApp},
	{"fb_iab", BrowserInApp}, // Facebook (Android)
	{"instagram", BrowserInApp},
	{"musical_ly", BrowserInApp}, // TikTok
	{"bytedancewebview", BrowserInApp},
	{"tiktok", BrowserInApp},
	{"micromessenger", BrowserInApp}, // WeChat
	{" line/", BrowserInApp},
	{"snapchat", BrowserInApp},
	{"twitter for", BrowserInApp},
	{"linkedinapp", BrowserInApp},
	{"kakaotalk", BrowserInApp},
	{"naver(inapp", BrowserInApp},
	{"weibo", BrowserInApp},
	{"alipayclient", BrowserInApp},
	{"baiduboxapp", BrowserInApp},
	{"dingtalk", BrowserInApp},
	{" qq/", BrowserInApp},
	{"gsa/", BrowserInApp},   // the Google app (iOS)
	{"; wv)", BrowserInApp},  // an Android WebView: some app's
	{"edg/", BrowserEdge},    // Edge (Chromium)
	{"edga/", BrowserEdge},   // Edge (Android)
	{"edgios/", BrowserEdge}, // Edge (iOS)
	{" edge/", BrowserEdge},  // Edge (EdgeHTML)
	{"opr/", BrowserOpera},   // Opera (Chromium)
	{"opios/", BrowserOpera},
	{" opt/", BrowserOpera}, // Opera Touch
	{"opera", BrowserOpera}, // Opera (Presto), Opera Mini
	{"samsungbrowser/", BrowserSamsung},
	{"yabrowser/", BrowserYandex},
	{"ucbrowser", BrowserUC},
	{"ucweb", BrowserUC},
	{"firefox/", BrowserFirefox},
	{"fxios/", BrowserFirefox},
	{"msie ", BrowserIE},
	{"trident/", BrowserIE}, // IE 11
	{"crios/", BrowserChrome},
	{"chrome/", BrowserChrome},
	{"chromium/", BrowserChrome},
	{"safari/", BrowserSafari}, // only on Apple's systems: resolved after the pass
	{"applewebkit/", browserWebKit},
}

// osRules decide the OS family: the first rule whose token appears wins.
// Windows Phone 10 claims Android; HarmonyOS 2-4 claims Android; iOS says
// "like Mac OS X"; ChromeOS and Android say "Linux"; TV and console
// systems run Linux or Windows but are neither to a person looking at the
// breakdown. "cros " keeps its space: "microsoft" holds "cros".
var osRules = []rule[OS]{
	{"windows phone", OSOther},
	{"harmonyos", OSHarmonyOS},
	{"openharmony", OSHarmonyOS},
	{"ipad", OSIPadOS},
	{"iphone", OSIOS},
	{"ipod", OSIOS},
	{"cros ", OSChromeOS},
	{"android", OSAndroid},
	{"tizen", OSOther},
	{"web0s", OSOther},
	{"webos", OSOther},
	{"kaios", OSOther},
	{"playstation", OSOther},
	{"nintendo", OSOther},
	{"mac os x", OSMacOS},
	{"macintosh", OSMacOS},
	{"windows", OSWindows},
	{"linux", OSLinux},
}

type rule[T Device | Browser | OS] struct {
	token string
	value T
}

// Agent is what a User-Agent tells about the client.
type Agent struct {
	Device  Device
	Bot     bool
	Browser Browser
	OS      OS
}

// Classify returns the device class and whether ua is a bot:
// ParseUserAgent's first two answers.
func Classify(ua []byte) (Device, bool) {
	a := ParseUserAgent(ua)
	return a.Device, a.Bot
}

// ParseUserAgent classifies ua: device class, bot flag, browser and OS
// family. It looks at the first MaxUserAgentLen bytes only,
// case-insensitively, with plain substring tables (no regular
// expressions), in one pass, without allocating; edges run it in their
// publisher goroutine, never in the request handler. A bot keeps the
// classes its UA claims (a "mobile" crawler); an empty User-Agent is a bot
// of unknown everything: browsers always send one. A UA that names no
// device is DeviceUnknown, one that names no browser or OS is "other".
func ParseUserAgent(ua []byte) Agent {
	if len(ua) == 0 {
		return Agent{Bot: true}
	}
	var buf [MaxUserAgentLen]byte
	n := copy(buf[:], ua)
	low := buf[:n]
	for i, c := range low {
		if 'A' <= c && c <= 'Z' {
			low[i] = c + 'a' - 'A'
		}
	}
	// One pass over the UA: at each byte only the tokens starting with it
	// are compared (a dozen of 150), each only while it could still beat
	// its table's best match so far, so a typical UA costs about a
	// microsecond instead of a scan per token.
	bot := false
	best := [numTables]int{deviceTable: len(deviceRules), browserTable: len(browserRules), osTable: len(osRules)}
	for i, c := range low {
		// Most positions start no token's first two bytes: one bit test
		// skips them. (Every token is at least three bytes long.)
		if i+1 >= len(low) || pairIndex[c][low[i+1]>>6]&(1<<(low[i+1]&63)) == 0 {
			continue
		}
		for _, t := range tokenIndex[c] {
			if t.table == botTable {
				if bot {
					continue
				}
			} else if t.rule >= best[t.table] {
				continue
			}
			if len(low)-i < len(t.token) || string(low[i:i+len(t.token)]) != t.token {
				continue
			}
			if t.table == botTable {
				bot = true
			} else {
				best[t.table] = t.rule
			}
		}
	}
	a := Agent{Bot: bot, Browser: BrowserOther, OS: OSOther}
	if r := best[deviceTable]; r < len(deviceRules) {
		a.Device = deviceRules[r].value
	}
	if r := best[osTable]; r < len(osRules) {
		a.OS = osRules[r].value
	}
	if r := best[browserTable]; r < len(browserRules) {
		a.Browser = browserRules[r].value
	}
	apple := a.OS == OSIOS || a.OS == OSIPadOS || a.OS == OSMacOS
	switch {
	case a.Browser == browserWebKit && (a.OS == OSIOS || a.OS == OSIPadOS):
		a.Browser = BrowserInApp // an app's WKWebView: Safari would say "Safari/"
	case a.Browser == browserWebKit, a.Browser == BrowserSafari && !apple:
		a.Browser = BrowserOther // Android's old stock browser, desktop apps' web views
	}
	return a
}

const (
	botTable = iota
	deviceTable
	browserTable
	osTable
	numTables
)

type indexedToken struct {
	token string
	table int
	rule  int // index in the table's rules (bots: unused)
}

// tokenIndex lists the tokens of every table by their first byte, and
// pairIndex marks which second bytes follow each first byte in some token.
var tokenIndex, pairIndex = func() (idx [256][]indexedToken, pairs [256][4]uint64) {
	add := func(token string, table, rule int) {
		if len(token) < 3 {
			panic("clicks: user-agent token " + token + " shorter than 3 bytes")
		}
		idx[token[0]] = append(idx[token[0]], indexedToken{token, table, rule})
		pairs[token[0]][token[1]>>6] |= 1 << (token[1] & 63)
	}
	for _, t := range botTokens {
		add(t, botTable, 0)
	}
	for i, r := range deviceRules {
		add(r.token, deviceTable, i)
	}
	for i, r := range browserRules {
		add(r.token, browserTable, i)
	}
	for i, r := range osRules {
		add(r.token, osTable, i)
	}
	return idx, pairs
}()
