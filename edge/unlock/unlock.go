// Package unlock is what an edge needs to open a password-protected link:
// the signed, short-lived, per-link cookie that says a visitor gave the
// right password, the password form's CSRF token, the form itself (a
// small HTML page: no script, nothing of the link's target) and its
// parsing, and the verification of a password against the link's argon2id
// hash (shared/passhash), bounded twice: attempts per client and per link
// (token buckets), and verifications at once (each holds the hash's
// memory, 19 MiB by default, and about 80 ms of a core).
//
// edge/redirect serves the form and the post with it (docs/edge.md,
// "Password-protected links"). Nothing here keeps a password or a client
// address beyond the request; the attempt tables key clients by address
// (an IPv6 client by its /64) only to count their attempts, in memory.
package unlock

import (
	"crypto/rand"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/edgelink/edgelink/edge/ratelimit"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/passhash"
)

// Config sizes a Gate. Zero values take the defaults noted.
type Config struct {
	// Keys sign cookies and form tokens; nil: RandomKeys (cookies then
	// hold on this edge only, until it restarts).
	Keys *Keys
	// CookieTTL is how long a right password opens its link for the
	// browser that gave it (default 1h).
	CookieTTL time.Duration
	// FormTTL is how long a form may wait to be posted (default 1h).
	FormTTL time.Duration
	// ClientRate and ClientBurst are each client's attempts per second and
	// burst, over all links (defaults 0.1/s, 10: ten tries, then one every
	// ten seconds). An IPv6 client is its /64. A negative rate turns the
	// limit off.
	ClientRate  float64
	ClientBurst int
	// LinkRate and LinkBurst are each link's attempts per second and
	// burst, over all clients (defaults 1/s, 60): what bounds guessing
	// from many addresses.
	LinkRate  float64
	LinkBurst int
	// MaxClients and MaxLinks bound the attempt tables (defaults 100,000
	// each). A full client table forgets clients to take new ones; a full
	// link table refuses attempts at links it does not hold until buckets
	// refill, so a flood of links cannot reset the budget of one under
	// attack.
	MaxClients, MaxLinks int
	// Verifiers bounds the verifications running at once (default 2: 38
	// MiB at the default parameters); VerifyWait is how long an attempt
	// waits for one to finish before it is answered 503 (default 100ms),
	// and at most 4·Verifiers attempts wait.
	Verifiers  int
	VerifyWait time.Duration
	// Now is the attempt tables' clock (default time.Now).
	Now func() time.Time
	// Verify checks password against hash (default passhash.Verify).
	// Tests replace it to hold verifications open, which a real argon2id
	// does for too short and unsteady a time to fill the slots on cue.
	Verify func(hash, password []byte) (bool, error)
}

// Outcome is how an attempt ended.
type Outcome uint8

// Outcomes of Attempt.
const (
	// Right: the password is the link's.
	Right Outcome = iota
	// Wrong: it is not (or cannot be: too long, invalid UTF-8, a control
	// character, too short).
	Wrong
	// LimitedClient and LimitedLink: the client's or the link's attempts
	// are spent; nothing was verified.
	LimitedClient
	LimitedLink
	// Busy: no verification slot freed up in time; nothing was verified.
	Busy
	// Broken: the link's hash cannot be read (never for a hash control
	// made; such a link never opens).
	Broken
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"right", "wrong", "limited_client", "limited_link", "busy", "broken"}

// String names the outcome as metrics do.
func (o Outcome) String() string {
	if o >= numOutcomes {
		return "unknown"
	}
	return outcomeNames[o]
}

// Outcomes lists every outcome, for metrics.
func Outcomes() []Outcome {
	out := make([]Outcome, numOutcomes)
	for i := range out {
		out[i] = Outcome(i)
	}
	return out
}

// Gate opens password-protected links. Safe for concurrent use.
type Gate struct {
	cfg     Config
	keys    *Keys
	clients *ratelimit.Keyed[netip.Addr]
	links   *ratelimit.Keyed[linkKey]
	slots   chan struct{}
	waiting atomic.Int32
	// Attempts counts attempts by outcome.
	Attempts [numOutcomes]atomic.Uint64
}

type linkKey struct {
	d    link.DomainID
	code string
}

// New returns a Gate sized by cfg.
func New(cfg Config) *Gate {
	if cfg.Keys == nil {
		cfg.Keys = RandomKeys()
	}
	if cfg.CookieTTL <= 0 {
		cfg.CookieTTL = time.Hour
	}
	if cfg.FormTTL <= 0 {
		cfg.FormTTL = time.Hour
	}
	if cfg.ClientRate == 0 {
		cfg.ClientRate = 0.1
	}
	if cfg.ClientBurst <= 0 {
		cfg.ClientBurst = 10
	}
	if cfg.LinkRate == 0 {
		cfg.LinkRate = 1
	}
	if cfg.LinkBurst <= 0 {
		cfg.LinkBurst = 60
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = 100_000
	}
	if cfg.MaxLinks <= 0 {
		cfg.MaxLinks = 100_000
	}
	if cfg.Verifiers <= 0 {
		cfg.Verifiers = 2
	}
	if cfg.VerifyWait <= 0 {
		cfg.VerifyWait = 100 * time.Millisecond
	}
	if cfg.Verify == nil {
		cfg.Verify = passhash.Verify[[]byte]
	}
	return &Gate{cfg: cfg, keys: cfg.Keys,
		clients: ratelimit.NewKeyed[netip.Addr](cfg.ClientRate, cfg.ClientBurst, cfg.MaxClients, false, cfg.Now),
		links:   ratelimit.NewKeyed[linkKey](cfg.LinkRate, cfg.LinkBurst, cfg.MaxLinks, true, cfg.Now),
		slots:   make(chan struct{}, cfg.Verifiers)}
}

// Keys are the gate's signing keys.
func (g *Gate) Keys() *Keys { return g.keys }

// CookieTTL is how long an unlock cookie holds.
func (g *Gate) CookieTTL() time.Duration { return g.cfg.CookieTTL }

// Unlocked reports whether cookie, an unlock cookie's value, opens code on
// domain d with password hash hash at now (Unix seconds). It does not
// allocate.
func (g *Gate) Unlocked(cookie []byte, d link.DomainID, code, hash []byte, now int64) bool {
	return len(cookie) > 0 && g.keys.CheckUnlock(cookie, d, code, hash, now)
}

// AppendCookie appends the value of an unlock cookie for code on domain d
// with password hash hash, given at now (Unix seconds): it holds for
// CookieTTL.
func (g *Gate) AppendCookie(dst []byte, d link.DomainID, code, hash []byte, now int64) []byte {
	return g.keys.AppendUnlock(dst, d, code, hash, now+int64(g.cfg.CookieTTL/time.Second))
}

// NonceLen is the length of a form cookie's value: 16 random bytes,
// base64url.
const NonceLen = 22

// NewForm returns a fresh form cookie's value (a random nonce) and the
// form's token bound to it, for code on domain d at now (Unix seconds).
func (g *Gate) NewForm(d link.DomainID, code []byte, now int64) (nonce, token []byte) {
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	nonce = b64.AppendEncode(make([]byte, 0, NonceLen), raw[:])
	token = g.keys.AppendFormToken(make([]byte, 0, TokenLen), d, code, nonce, now+int64(g.cfg.FormTTL/time.Second))
	return nonce, token
}

// FormTTL is how long a form's cookie and token hold.
func (g *Gate) FormTTL() time.Duration { return g.cfg.FormTTL }

// CheckForm reports whether token is a form token for code on domain d,
// bound to nonce (the form cookie the browser sent back), unexpired at
// now. A cross-site post carries no form cookie (it is SameSite=Strict),
// and a page that is not the edge's cannot read one to bind a token to.
func (g *Gate) CheckForm(nonce, token []byte, d link.DomainID, code []byte, now int64) bool {
	return len(nonce) == NonceLen && isBase64URL(nonce) && g.keys.CheckFormToken(token, d, code, nonce, now)
}

// Attempt tries password on code of domain d, whose password hash is hash,
// for client: the client's attempt is taken first, then the link's (so
// one client past its budget spends none of the link's), then a
// verification slot, waited for at most VerifyWait. tooLong marks a
// password longer than any link's. retry is how long a limited or busy
// attempt should wait.
func (g *Gate) Attempt(client netip.Addr, d link.DomainID, code, hash, password []byte, tooLong bool) (o Outcome, retry time.Duration) {
	o, retry = g.attempt(client, d, code, hash, password, tooLong)
	g.Attempts[o].Add(1)
	return o, retry
}

func (g *Gate) attempt(client netip.Addr, d link.DomainID, code, hash, password []byte, tooLong bool) (Outcome, time.Duration) {
	if !g.clients.Allow(clientKey(client)) {
		return LimitedClient, g.clients.RetryAfter()
	}
	if !g.links.Allow(linkKey{d, string(code)}) {
		return LimitedLink, g.links.RetryAfter()
	}
	if tooLong || passhash.CheckPassword(string(password)) != nil {
		return Wrong, 0 // no link has such a password: nothing to verify
	}
	if !g.acquire() {
		return Busy, time.Second
	}
	ok, err := g.cfg.Verify(hash, password)
	<-g.slots
	switch {
	case err != nil:
		return Broken, 0
	case ok:
		return Right, 0
	}
	return Wrong, 0
}

// acquire takes a verification slot, waiting at most VerifyWait with at
// most 4·Verifiers others: load is shed, not queued.
func (g *Gate) acquire() bool {
	select {
	case g.slots <- struct{}{}:
		return true
	default:
	}
	if int(g.waiting.Add(1)) > 4*cap(g.slots) {
		g.waiting.Add(-1)
		return false
	}
	defer g.waiting.Add(-1)
	t := time.NewTimer(g.cfg.VerifyWait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// clientKey is who counts as one client: an IPv4 address, or an IPv6
// address's /64 (what one subscriber is usually given whole).
func clientKey(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return a
}
