package unlock

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/passhash"
)

// cheap are the cheapest parameters passhash takes, for tests that verify
// many times.
var cheap = passhash.Params{Memory: passhash.MinMemory, Time: 1, Threads: 1}

func hashOf(t testing.TB, password string) []byte {
	t.Helper()
	h, err := passhash.Hash([]byte(password), cheap, nil)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(h)
}

func keyLine(name string, fill byte, n int) string {
	return name + " " + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{fill}, n)) + "\n"
}

func TestParseKeys(t *testing.T) {
	k, err := ParseKeys(strings.NewReader("# unlock keys\n\n" + keyLine("new", 1, 32) + keyLine("old", 2, 64)))
	if err != nil {
		t.Fatal(err)
	}
	if got := k.Names(); len(got) != 2 || got[0] != "new" || got[1] != "old" {
		t.Fatalf("names %v, want [new old] in file order", got)
	}
	if s := k.String() + k.GoString(); strings.Contains(s, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))) {
		t.Fatalf("String shows a key: %s", s)
	}
	secret := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 16))
	for _, bad := range []string{
		"",
		"# only a comment\n",
		"k " + secret + "\n", // 16 bytes: too short
		keyLine("k", 1, 65),
		"k not-base64!\n",
		"k " + base64.RawStdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)) + "\n", // unpadded
		"k\n",
		"k a b\n",
		"bad/name " + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)) + "\n",
		keyLine("k", 1, 32) + keyLine("k", 2, 32),
		keyLine("a", 1, 32) + keyLine("b", 1, 32), // the same key twice
	} {
		if _, err := ParseKeys(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseKeys(%q) took it", bad)
		} else if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "AQEB") {
			t.Errorf("error %q shows key material", err)
		}
	}
}

// TestTokens: a cookie opens its own link only (domain, code, password
// hash), until it expires, under any key the edge holds; a form token
// holds only with its nonce; nothing tampered, truncated or of the other
// kind passes.
func TestTokens(t *testing.T) {
	keys, err := ParseKeys(strings.NewReader(keyLine("a", 1, 32) + keyLine("b", 2, 32)))
	if err != nil {
		t.Fatal(err)
	}
	hash, other := hashOf(t, "correct horse"), hashOf(t, "correct horse") // same password, new salt: a password change
	const now = 1_900_000_000
	c := keys.AppendUnlock(nil, 7, []byte("abc123"), hash, now+60)
	if len(c) != TokenLen || !isBase64URL(c) {
		t.Fatalf("cookie %q: %d characters, want %d of base64url", c, len(c), TokenLen)
	}
	check := func(what string, got, want bool) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	check("its own link", keys.CheckUnlock(c, 7, []byte("abc123"), hash, now), true)
	check("one second before expiry", keys.CheckUnlock(c, 7, []byte("abc123"), hash, now+59), true)
	check("at expiry", keys.CheckUnlock(c, 7, []byte("abc123"), hash, now+60), false)
	check("another domain", keys.CheckUnlock(c, 8, []byte("abc123"), hash, now), false)
	check("another code", keys.CheckUnlock(c, 7, []byte("abc124"), hash, now), false)
	check("another case", keys.CheckUnlock(c, 7, []byte("ABC123"), hash, now), false)
	check("after a password change", keys.CheckUnlock(c, 7, []byte("abc123"), other, now), false)
	check("as a form token", keys.CheckFormToken(c, 7, []byte("abc123"), hash, now), false)
	for i := range c {
		bad := bytes.Clone(c)
		bad[i] ^= 1
		if keys.CheckUnlock(bad, 7, []byte("abc123"), hash, now) {
			t.Errorf("a cookie with character %d changed passes", i)
		}
	}
	check("truncated", keys.CheckUnlock(c[:len(c)-1], 7, []byte("abc123"), hash, now), false)
	check("extended", keys.CheckUnlock(append(bytes.Clone(c), 'A'), 7, []byte("abc123"), hash, now), false)
	check("empty", keys.CheckUnlock(nil, 7, []byte("abc123"), hash, now), false)

	// Rotation: b moved first signs; a cookie a signed still passes while
	// a is held, and not once it is removed. A stranger's key never.
	rotated, _ := ParseKeys(strings.NewReader(keyLine("b", 2, 32) + keyLine("a", 1, 32)))
	gone, _ := ParseKeys(strings.NewReader(keyLine("b", 2, 32)))
	stranger, _ := ParseKeys(strings.NewReader(keyLine("x", 3, 32)))
	check("old key still held", rotated.CheckUnlock(c, 7, []byte("abc123"), hash, now), true)
	check("old key removed", gone.CheckUnlock(c, 7, []byte("abc123"), hash, now), false)
	check("a stranger's keys", stranger.CheckUnlock(c, 7, []byte("abc123"), hash, now), false)
	check("signed by the new first key", keys.CheckUnlock(rotated.AppendUnlock(nil, 7, []byte("abc123"), hash, now+60), 7, []byte("abc123"), hash, now), true)

	nonce := []byte("AAAAAAAAAAAAAAAAAAAAAA")
	f := keys.AppendFormToken(nil, 7, []byte("abc123"), nonce, now+60)
	check("form token with its nonce", keys.CheckFormToken(f, 7, []byte("abc123"), nonce, now), true)
	check("form token with another nonce", keys.CheckFormToken(f, 7, []byte("abc123"), []byte("BAAAAAAAAAAAAAAAAAAAAA"), now), false)
	check("form token for another link", keys.CheckFormToken(f, 7, []byte("abc124"), nonce, now), false)
	check("form token as a cookie", keys.CheckUnlock(f, 7, []byte("abc123"), nonce, now), false)
	check("form token expired", keys.CheckFormToken(f, 7, []byte("abc123"), nonce, now+60), false)

	if n := testing.AllocsPerRun(200, func() { keys.CheckUnlock(c, 7, []byte("abc123"), hash, now) }); n != 0 && !raceEnabled {
		t.Errorf("CheckUnlock allocated %v times", n)
	}
}

func TestTokensConcurrently(t *testing.T) {
	keys := RandomKeys()
	hash := hashOf(t, "correct horse")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			code := []byte{'c', 'o', 'd', 'e', byte('a' + i)}
			for j := range 500 {
				c := keys.AppendUnlock(nil, link.DomainID(i), code, hash, int64(1000+j))
				if !keys.CheckUnlock(c, link.DomainID(i), code, hash, 999) || keys.CheckUnlock(c, link.DomainID(i+1), code, hash, 999) {
					t.Errorf("goroutine %d: a cookie judged wrongly", i)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestParseForm(t *testing.T) {
	token := strings.Repeat("A", TokenLen)
	tests := []struct {
		body     string
		password string
		tooLong  bool
		err      bool
	}{
		{"csrf=" + token + "&password=hunter22", "hunter22", false, false},
		{"password=hunter22&csrf=" + token, "hunter22", false, false},
		{"password=a+b%20c%2B%26%3D&csrf=" + token, "a b c+&=", false, false},
		{"password=%E2%9C%93%C3%A9t%C3%A9&csrf=" + token, "✓été", false, false},
		{"password=%ff%fe&csrf=" + token, "\xff\xfe", false, false}, // not UTF-8: decoded, judged later
		{"password=%0D%0Aline&csrf=" + token, "\r\nline", false, false},
		{"csrf=" + token, "", false, false},
		{"password=&csrf=" + token + "&submit=go&&x", "", false, false},
		{"passwordX=1&csrf=" + token, "", false, false}, // another field
		{"password=" + strings.Repeat("x", passhash.MaxPasswordLen+1) + "&csrf=" + token, strings.Repeat("x", passhash.MaxPasswordLen), true, false},
		{"password=hunter22", "", false, true},                                // no token
		{"password=a&password=b&csrf=" + token, "", false, true},              // twice
		{"csrf=" + token + "&csrf=" + token + "&password=a", "", false, true}, // twice
		{"password=%zz&csrf=" + token, "", false, true},
		{"password=%4&csrf=" + token, "", false, true},
		{"pass%word=1&csrf=" + token, "", false, true},
		{"password=x&csrf=" + token + "A", "", false, true},                     // too long a token
		{"password=x&csrf=" + token[:20] + "%41" + token[23:], "", false, true}, // encoded
		{"password=x&csrf=" + token[:20] + "+" + token[21:], "", false, true},
		{strings.Repeat("a", MaxBodyLen+1), "", false, true},
	}
	for _, tt := range tests {
		var f Form
		err := ParseForm([]byte(tt.body), &f)
		if (err != nil) != tt.err {
			t.Errorf("ParseForm(%.60q): error %v, want error %v", tt.body, err, tt.err)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrBadForm) {
				t.Errorf("ParseForm(%.60q): %v does not wrap ErrBadForm", tt.body, err)
			}
			continue
		}
		if string(f.Password) != tt.password || f.TooLong != tt.tooLong || string(f.Token) != token {
			t.Errorf("ParseForm(%.60q): password %q too long %v token %q; want %q %v", tt.body, f.Password, f.TooLong, f.Token, tt.password, tt.tooLong)
		}
	}
	var f Form
	body := []byte("password=a+b%20c&csrf=" + token)
	if n := testing.AllocsPerRun(100, func() { _ = ParseForm(body, &f) }); n != 0 {
		t.Errorf("ParseForm allocated %v times", n)
	}
}

func FuzzParseForm(f *testing.F) {
	token := strings.Repeat("A", TokenLen)
	for _, s := range []string{"password=hunter22&csrf=" + token, "password=%E2%9C%93&csrf=" + token, "csrf=&password=", "%", "&&&=", "password=%4", "a=b=c&csrf=" + token} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var form Form
		if err := ParseForm(body, &form); err != nil {
			if !errors.Is(err, ErrBadForm) {
				t.Fatalf("error %v does not wrap ErrBadForm", err)
			}
			return
		}
		if len(body) > MaxBodyLen {
			t.Fatalf("a body of %d bytes taken", len(body))
		}
		if len(form.Password) > passhash.MaxPasswordLen || len(form.Token) > TokenLen || !isBase64URL(form.Token) {
			t.Fatalf("password of %d bytes, token %q", len(form.Password), form.Token)
		}
		if !bytes.Contains(body, []byte(FieldToken)) {
			t.Fatalf("taken without a token field: %q", body)
		}
		// The token is in the body as it was; the password, decoded,
		// is no longer than its encoding.
		if !bytes.Contains(body, form.Token) || len(form.Password) > len(body) {
			t.Fatalf("fields not from the body: %q", body)
		}
	})
}

// TestPage: the page is the form and nothing of the link but the action
// given; every variable part escaped; its one style allowed by the CSP's
// hash and no script anywhere.
func TestPage(t *testing.T) {
	p := AppendPage(nil, &Page{Action: []byte(`/abc123/unlock?q="><script>alert(1)</script>&x='y'`), Token: []byte("tok"), Message: MessageWrong})
	s := string(p)
	for _, want := range []string{
		`<form method="post" action="/abc123/unlock?q=&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;x=&#39;y&#39;">`,
		`<input type="hidden" name="csrf" value="tok">`,
		`name="password" type="password"`,
		`<p class="error" role="alert">That password is not right.</p>`,
		`<meta name="robots" content="noindex, nofollow, noarchive">`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %s:\n%s", want, s)
		}
	}
	if strings.Contains(strings.ToLower(s), "<script") || strings.Contains(s, "javascript:") {
		t.Errorf("page has script:\n%s", s)
	}
	if !strings.Contains(ContentSecurityPolicy, "'sha256-"+styleHash()+"'") || !strings.Contains(s, "<style>"+style+"</style>") {
		t.Error("the page's style is not the one the CSP allows")
	}
	if strings.Contains(ContentSecurityPolicy, "script-src") || !strings.Contains(ContentSecurityPolicy, "default-src 'none'") {
		t.Errorf("CSP %q", ContentSecurityPolicy)
	}
	if plain := string(AppendPage(nil, &Page{Action: []byte("/abc123/unlock"), Token: []byte("t")})); strings.Contains(plain, "role=\"alert\"") {
		t.Error("a first view shows an error")
	}
}

// TestAttempts: the client's budget is spent before the link's; a link's
// budget holds against many clients; a password no link can have is
// wrong without verifying; right and wrong are told apart by the hash.
func TestAttempts(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	var verified int
	var mu sync.Mutex
	g := New(Config{ClientRate: 1, ClientBurst: 3, LinkRate: 1, LinkBurst: 5, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		Verify: func(hash, password []byte) (bool, error) {
			verified++
			return passhash.Verify(hash, password)
		}})
	hash := hashOf(t, "correct horse")
	alice := netip.MustParseAddr("192.0.2.1")
	code := []byte("abc123")
	try := func(c netip.Addr, p string) Outcome {
		o, _ := g.Attempt(c, 1, code, hash, []byte(p), false)
		return o
	}
	if o := try(alice, "wrong horse"); o != Wrong {
		t.Fatalf("a wrong password: %v", o)
	}
	if o := try(alice, "correct horse"); o != Right {
		t.Fatalf("the right password: %v", o)
	}
	if o := try(alice, "short"); o != Wrong || verified != 2 {
		t.Fatalf("a password no link can have: %v after %d verifications, want wrong without one", o, verified)
	}
	if o, retry := g.Attempt(alice, 1, code, hash, []byte("correct horse"), false); o != LimitedClient || retry != time.Second {
		t.Fatalf("the 4th attempt of a client with a burst of 3: %v, retry %v", o, retry)
	}
	// Another client, the same link: the link has 2 attempts left of 5.
	for i := range 2 {
		if o := try(netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), "wrong horse"); o != Wrong {
			t.Fatalf("attempt %d of another client: %v", i, o)
		}
	}
	if o := try(netip.MustParseAddr("198.51.100.200"), "correct horse"); o != LimitedLink {
		t.Fatalf("the link's 6th attempt: %v", o)
	}
	// Another link is not limited by this one's budget.
	if o, _ := g.Attempt(netip.MustParseAddr("198.51.100.201"), 1, []byte("abc124"), hash, []byte("correct horse"), false); o != Right {
		t.Fatalf("another link: %v", o)
	}
	// A refill of one second gives the link one attempt more.
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	if o := try(netip.MustParseAddr("198.51.100.202"), "correct horse"); o != Right {
		t.Fatalf("after a refill: %v", o)
	}
	// IPv6: one /64 is one client.
	v6 := New(Config{ClientRate: 1, ClientBurst: 2, LinkRate: 100, LinkBurst: 100, Verify: func(_, _ []byte) (bool, error) { return false, nil }})
	for i, a := range []string{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:2::77"} {
		o, _ := v6.Attempt(netip.MustParseAddr(a), 1, code, hash, []byte("correct horse"), false)
		if want := map[bool]Outcome{true: Wrong, false: LimitedClient}[i < 2]; o != want {
			t.Fatalf("%s (attempt %d of one /64): %v, want %v", a, i, o, want)
		}
	}
	if o, _ := v6.Attempt(netip.MustParseAddr("2001:db8:1:3::1"), 1, code, hash, []byte("correct horse"), false); o != Wrong {
		t.Fatalf("another /64: %v", o)
	}
	if g.Attempts[Right].Load() != 3 || g.Attempts[LimitedClient].Load() != 1 || g.Attempts[LimitedLink].Load() != 1 {
		t.Fatalf("counts right %d limited client %d link %d", g.Attempts[Right].Load(), g.Attempts[LimitedClient].Load(), g.Attempts[LimitedLink].Load())
	}
}

// TestVerificationsAreBounded: with every slot held, an attempt waits at
// most VerifyWait and is Busy; at most 4·Verifiers wait, the rest are Busy
// at once; a slot freed is taken by a waiter. Verify is held open by the
// test: a real argon2id is over before the test could look.
func TestVerificationsAreBounded(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 100)
	g := New(Config{Verifiers: 2, VerifyWait: time.Hour, ClientRate: -1, LinkRate: -1,
		Verify: func(_, _ []byte) (bool, error) { started <- struct{}{}; <-release; return true, nil }})
	hash := hashOf(t, "correct horse")
	results := make(chan Outcome, 100)
	attempt := func(i int) {
		o, _ := g.Attempt(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 1, []byte("abc123"), hash, []byte("correct horse"), false)
		results <- o
	}
	for i := range 2 {
		go attempt(i)
		<-started
	}
	// 8 may wait (4·2); the 11th and 12th are turned away at once.
	for i := 2; i < 10; i++ {
		go attempt(i)
	}
	poll.Until(t, "8 attempts waiting for a slot", 10*time.Second, func() bool { return g.waiting.Load() == 8 })
	for i := 10; i < 12; i++ {
		attempt(i)
		if o := <-results; o != Busy {
			t.Fatalf("attempt %d past the waiting bound: %v, want busy", i, o)
		}
	}
	close(release) // every verification ends: the waiters all get a slot
	for range 10 {
		if o := <-results; o != Right {
			t.Fatalf("a waiter: %v, want right", o)
		}
	}

	// A short wait expires: Busy.
	hold := make(chan struct{})
	short := New(Config{Verifiers: 1, VerifyWait: 20 * time.Millisecond, ClientRate: -1, LinkRate: -1,
		Verify: func(_, _ []byte) (bool, error) { <-hold; return true, nil }})
	go func() {
		o, _ := short.Attempt(netip.MustParseAddr("10.0.0.1"), 1, []byte("abc123"), hash, []byte("correct horse"), false)
		results <- o
	}()
	poll.Until(t, "the one slot held", 10*time.Second, func() bool { return len(short.slots) == 1 })
	if o, retry := short.Attempt(netip.MustParseAddr("10.0.0.2"), 1, []byte("abc123"), hash, []byte("correct horse"), false); o != Busy || retry != time.Second {
		t.Fatalf("with the one slot held: %v retry %v, want busy after the wait", o, retry)
	}
	close(hold)
	if o := <-results; o != Right {
		t.Fatalf("the held attempt: %v", o)
	}
}

func TestBrokenHash(t *testing.T) {
	g := New(Config{})
	if o, _ := g.Attempt(netip.MustParseAddr("10.0.0.1"), 1, []byte("abc123"), []byte("$argon2id$v=19$m=1,t=1,p=1$AAAA$AAAA"), []byte("correct horse"), false); o != Broken {
		t.Fatalf("a hash passhash refuses: %v", o)
	}
}
