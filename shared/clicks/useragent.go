package clicks

// Device is the class of device a click came from, derived from its
// User-Agent by Classify.
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

// MaxUserAgentLen is how much of a User-Agent Classify looks at (and so how
// much an edge keeps per click). Every token below sits well inside the
// first 160 bytes of the User-Agents that carry it.
const MaxUserAgentLen = 160

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
var deviceRules = []struct {
	token  string
	device Device
}{
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
	{"android", DeviceTablet}, // Android without "mobile": a tablet, by Google's own UA rules
	{"windows phone", DeviceMobile},
	{"blackberry", DeviceMobile},
	{"opera mini", DeviceMobile},
	{"windows", DeviceDesktop},
	{"macintosh", DeviceDesktop},
	{"mac os x", DeviceDesktop},
	{"cros", DeviceDesktop},
	{"x11", DeviceDesktop},
	{"linux", DeviceDesktop},
}

// Classify returns the device class and whether ua is a bot. It looks at
// the first MaxUserAgentLen bytes only, case-insensitively, with plain
// substring tables (no regular expressions) and without allocating; edges
// run it in their publisher goroutine, never in the request handler. A bot
// keeps a device class when its UA claims one (a "mobile" crawler), and an
// empty User-Agent counts as a bot: browsers always send one.
func Classify(ua []byte) (Device, bool) {
	if len(ua) == 0 {
		return DeviceUnknown, true
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
	// are compared (a dozen of 70), so a typical UA costs well under a
	// microsecond instead of a scan per token.
	bot, best := false, len(deviceRules)
	for i, c := range low {
		for _, t := range tokenIndex[c] {
			if (t.rule < 0 && bot) || (t.rule >= 0 && t.rule >= best) {
				continue
			}
			if len(low)-i < len(t.token) || string(low[i:i+len(t.token)]) != t.token {
				continue
			}
			if t.rule < 0 {
				bot = true
			} else {
				best = t.rule
			}
		}
	}
	if best < len(deviceRules) {
		return deviceRules[best].device, bot
	}
	return DeviceUnknown, bot
}

type indexedToken struct {
	token string
	rule  int // index in deviceRules, or -1 for a bot token
}

// tokenIndex lists the tokens of both tables by their first byte.
var tokenIndex = func() (idx [256][]indexedToken) {
	for _, t := range botTokens {
		idx[t[0]] = append(idx[t[0]], indexedToken{t, -1})
	}
	for i, r := range deviceRules {
		idx[r.token[0]] = append(idx[r.token[0]], indexedToken{r.token, i})
	}
	return idx
}()

// ReferrerHost returns the host of a Referer header value, lower-cased,
// without scheme, credentials, port, path, query or fragment, cut to
// MaxReferrerLen; nil when there is none or it is not an absolute
// http(s) URL (an "android-app://" referrer keeps its package name as host).
// It writes into dst (at least MaxReferrerLen bytes) and does not allocate.
// Only the host is kept: the full referrer URL can carry personal data.
func ReferrerHost(dst, ref []byte) []byte {
	i := indexString(ref, "://")
	if i <= 0 || i > 32 {
		return nil
	}
	for _, c := range ref[:i] {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.') {
			return nil
		}
	}
	rest := ref[i+3:]
	end := len(rest)
	for j, c := range rest {
		if c == '/' || c == '?' || c == '#' || c == '\\' {
			end = j
			break
		}
	}
	host := rest[:end]
	if at := lastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:]
	}
	if len(host) > 0 && host[0] == '[' { // IPv6 literal: keep the brackets, drop the port
		if k := indexByte(host, ']'); k > 0 {
			host = host[:k+1]
		}
	} else if k := lastIndexByte(host, ':'); k >= 0 {
		host = host[:k]
	}
	for len(host) > 0 && host[len(host)-1] == '.' {
		host = host[:len(host)-1]
	}
	if len(host) == 0 {
		return nil
	}
	out := dst[:0]
	for _, c := range host {
		if len(out) == MaxReferrerLen {
			break
		}
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c < 0x21 || c > 0x7e:
			c = '?' // a header is bytes; the rollup stores text
		}
		out = append(out, c)
	}
	return out
}

func indexString(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func lastIndexByte(b []byte, c byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}
