package redirect

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// CountryLookup gives the country of a client address for rules' country
// conditions: ISO 3166-1 alpha-2, upper case, and whether it knows one
// (edge/geo's table, handed in by edgeserver: the handler does not import
// it). It must not allocate or block. The address goes no further than
// the lookup: it is neither kept nor published for a rule.
type CountryLookup interface {
	Lookup(netip.Addr) ([2]byte, bool)
}

// extras applies a link's extras (link.ViewExtras) to a request about to
// be redirected to origin+rest: its click limit (410 once its counted
// clicks reached it, before anything else; after the password, 410 once
// the edge's account says so: limit.go), its password (answered with the
// form unless the request carries the link's unlock cookie: ok false, the
// answer written) and its rules (the first that holds gives the target
// and its number, 1-based, else the link's own target serves as rule 0).
// It sets Vary to the request headers the answer depended on. It does not
// allocate on a redirect; the targets it returns point into b.
func (h *Handler) extras(ctx *fasthttp.RequestCtx, d link.DomainID, code, b []byte, nowMillis int64, origin, rest []byte) (rule int, o, r []byte, ok bool) {
	v := link.ViewExtras(b)
	if v.LimitReached() {
		// The counted clicks reached the limit: 410 before anything else
		// of the link, its password form included.
		if h.Limits != nil {
			h.Limits.Reached.Add(1)
		}
		h.Counters.Gone.Add(1)
		h.text(ctx, fasthttp.StatusGone, textGone)
		return 0, nil, nil, false
	}
	var vary uint8
	if hash := v.PasswordHash(); hash != nil {
		if !h.unlocked(ctx, d, code, hash, nowMillis) {
			h.passwordForm(ctx, d, code, nowMillis)
			return 0, nil, nil, false
		}
		vary |= varyCookie
	}
	if v.MaxClicks() > 0 && h.Limits != nil && !h.Limits.Allow(d, code, b) {
		// This edge's allowance of the link is spent, or the edges'
		// reports say its limit was served (limit.go): 410, after the
		// password (a form answered spends nothing), before the rules.
		h.Counters.Gone.Add(1)
		h.text(ctx, fasthttp.StatusGone, textGone)
		return 0, nil, nil, false
	}
	if v.HasRules() {
		needs := v.Needs()
		if needs.Has(link.NeedsDevice) {
			vary |= varyUserAgent
		}
		if needs.Has(link.NeedsLanguage) {
			vary |= varyLanguage
		}
		var target []byte
		if rule, target = h.route(ctx, &v, needs); rule > 0 {
			origin, rest = target, nil
			h.Counters.RuleHits.Add(1)
		} else {
			h.Counters.RuleDefaults.Add(1)
		}
	}
	if vary != 0 {
		ctx.Response.Header.SetCanonical(headerVary, varyValues[vary])
	}
	return rule, origin, rest, true
}

// route learns the facts the rules need, and only those (needs), and
// returns the first rule that holds (0 for none) and its target.
func (h *Handler) route(ctx *fasthttp.RequestCtx, v *link.ExtrasView, needs link.Needs) (int, []byte) {
	var f link.Facts
	if needs.Has(link.NeedsDevice) {
		f.Device = h.devices.of(ctx.Request.Header.UserAgent())
	}
	if needs.Has(link.NeedsCountry) && h.Countries != nil {
		if cc, ok := h.Countries.Lookup(h.clientIP(ctx)); ok {
			f.Country = cc
		}
	}
	if needs.Has(link.NeedsLanguage) {
		f.Language, _ = link.PrimaryLanguage(ctx.Request.Header.PeekBytes(headerAcceptLanguage))
	}
	if needs.Has(link.NeedsQuery) && len(ctx.URI().QueryString()) > 0 {
		// The request's own parsed arguments: no copy, and the interface
		// holds a pointer that is on the heap already.
		f.Query = (*queryArgs)(ctx.QueryArgs())
	}
	return v.Route(&f)
}

// RuleDevice is the device a rule sees in a User-Agent, read by the same
// classifier the clicks' device and OS come from (clicks.ParseUserAgent,
// docs/rules.md): iOS for an iPhone, iPod or iPad that says so (an iPad
// asking for desktop sites says it is a Mac, and is desktop), Android for
// an Android phone or tablet, desktop for a Windows, macOS, Linux or
// ChromeOS computer; none (0) for anything else: TVs, consoles, HarmonyOS,
// Windows Phone, a missing or unknown User-Agent.
func RuleDevice(ua []byte) link.Device {
	a := clicks.ParseUserAgent(ua)
	handheld := a.Device == clicks.DeviceMobile || a.Device == clicks.DeviceTablet
	switch a.OS {
	case clicks.OSIOS, clicks.OSIPadOS:
		if handheld {
			return link.DeviceIOS
		}
	case clicks.OSAndroid:
		if handheld {
			return link.DeviceAndroid
		}
	case clicks.OSWindows, clicks.OSMacOS, clicks.OSLinux, clicks.OSChromeOS:
		if a.Device == clicks.DeviceDesktop {
			return link.DeviceDesktop
		}
	}
	return 0
}

// queryArgs is fasthttp's parsed query string as rules ask it: names and
// values percent-decoded, '+' as a space.
type queryArgs fasthttp.Args

func (q *queryArgs) Has(name []byte) bool { return (*fasthttp.Args)(q).HasBytes(name) }

func (q *queryArgs) HasValue(name, value []byte) bool {
	for k, v := range (*fasthttp.Args)(q).All() {
		if string(k) == string(name) && string(v) == string(value) {
			return true
		}
	}
	return false
}

// Vary values, by the headers an answer depended on. A country also
// depends on the client's address, which no Vary can name: the answers'
// "private, no-store" is what keeps every cache from storing them.
const (
	varyUserAgent uint8 = 1 << iota
	varyLanguage
	varyCookie
)

var (
	headerVary           = []byte(fasthttp.HeaderVary)
	headerAcceptLanguage = []byte(fasthttp.HeaderAcceptLanguage)
	varyValues           = func() (v [8][]byte) {
		for i := range v {
			var s string
			for _, p := range []struct {
				bit  uint8
				name string
			}{{varyUserAgent, "User-Agent"}, {varyLanguage, "Accept-Language"}, {varyCookie, "Cookie"}} {
				if uint8(i)&p.bit != 0 {
					if s != "" {
						s += ", "
					}
					s += p.name
				}
			}
			v[i] = []byte(s)
		}
		return v
	}()
)

// deviceCache remembers RuleDevice's answer for the User-Agents seen
// lately: classifying one costs about a microsecond, more than the rest of
// a redirect, and a few hundred User-Agents make up most requests. It is
// direct-mapped, each slot one atomic word (a 56-bit tag of the
// User-Agent's seeded hash, a present bit, the device), so readers and
// writers race only to replace a slot, and a slot read is either the old
// entry or the new one. The seed is the edge's own: nobody can make a
// User-Agent whose slot and tag are another's. Its zero value is ready.
type deviceCache struct {
	once  sync.Once
	seed  maphash.Seed
	slots [deviceSlots]atomic.Uint64
}

const (
	deviceSlots   = 4096 // 32 KiB
	devicePresent = 0x80
)

// of is RuleDevice(ua), from the cache when it holds ua.
func (c *deviceCache) of(ua []byte) link.Device {
	c.once.Do(func() { c.seed = maphash.MakeSeed() })
	if len(ua) > clicks.MaxUserAgentLen {
		ua = ua[:clicks.MaxUserAgentLen] // all the classifier reads
	}
	h := maphash.Bytes(c.seed, ua)
	slot := &c.slots[h%deviceSlots]
	if e := slot.Load(); e&^0xff == h&^0xff && e&devicePresent != 0 {
		return link.Device(e & 0x7f)
	}
	d := RuleDevice(ua)
	slot.Store(h&^0xff | devicePresent | uint64(d))
	return d
}
