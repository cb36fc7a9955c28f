package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/edgelink/edgelink/control/apiclient"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// Kind is what became of a row.
type Kind string

// Row outcomes.
const (
	// Kept: created with its source code.
	Kept Kind = "kept"
	// Existing: a link of this tenant already had the code and the same
	// URL (an earlier import of another file); nothing was created.
	Existing Kind = "existing"
	// Recoded: created with a new code (the source code does not fit
	// the namespace's rules, is reserved or taken).
	Recoded Kind = "recoded"
	// Duplicate: an earlier row of the file has the same code and URL.
	Duplicate Kind = "duplicate"
	// Rejected: not imported; Reason says why.
	Rejected Kind = "rejected"
)

// Outcome is what became of one row.
type Outcome struct {
	Line int
	// Domain is the host the row's link is on (canonical), "" for the
	// platform's domain; for a rejected row, the domain it asked for.
	Domain  string
	OldCode string
	NewCode string // the code it has now (Kept, Existing, Recoded)
	URL     string
	Kind    Kind
	Reason  string // why it was recoded, skipped or rejected; for a link made, also what of its title and tags was left out
}

// Summary counts an import's outcomes; Outcomes are in file order.
type Summary struct {
	Format   Format
	Rows     int
	Kept     int
	Existing int
	Recoded  int
	Dups     int
	Rejected int
	// Chunks sent; Replayed of them were answered from an earlier run's
	// idempotency record (nothing new was created for them); Failed were
	// not imported at all (their rows are Rejected: run again).
	Chunks, Replayed, Failed int
	Outcomes                 []Outcome
}

// Imported is how many rows now have a link: kept, existing or recoded.
func (s *Summary) Imported() int { return s.Kept + s.Existing + s.Recoded }

// Progress is a snapshot of a running import.
type Progress struct {
	BytesRead, BytesTotal int64
	Rows, Done            int // rows read; rows with an outcome
	Imported, Rejected    int
}

// Options configure Run.
type Options struct {
	// Digest identifies the export's content (hex SHA-256 of the file):
	// with the chunk index it makes each chunk's Idempotency-Key, so a
	// re-run of the same file replays what an earlier run created.
	Digest string
	// BatchSize is links per batch request (1 to 1,000; default 1,000).
	// Re-run with the same value: keys name chunks by index, so with
	// another size the chunks both runs have are refused (409, other
	// contents under the same key), but the extra ones go under new keys
	// and create again the rows the first run re-coded.
	BatchSize int
	// Concurrency bounds batch requests in flight (default 4).
	Concurrency int
	// Namespace and RedirectType apply to every link ("" and 0: the
	// API's defaults).
	Namespace    string
	RedirectType int
	// DefaultDomains are hosts that stand for the platform's domain (or
	// Domain, when set): the source's own default domain as its export
	// names it (Shlink's web client writes every row's host, the default
	// one's too). A row on any other host is imported on the tenant's
	// domain of that host, and rejected by the API when the tenant has
	// none: add the domains first. A row without a domain, or on
	// Shlink's "DEFAULT", is on the platform's (or Domain).
	DefaultDomains []string
	// Domain is the host of the tenant's domain that rows naming no
	// domain of their own go on: rows without one, on Shlink's
	// "DEFAULT", or on one of DefaultDomains. "" is the platform's.
	Domain string
	// Progress, if set, is called after every chunk (serialized).
	Progress   func(Progress)
	BytesTotal int64
}

// maxBatchBody keeps a batch's body under the API's 5 MiB limit.
const maxBatchBody = 4 << 20

// maxURL is the API's limit on targets.
const maxURL = 4096

type item struct {
	line    int
	domain  string // canonical host; "" for the platform's
	oldCode string
	url     string
	title   string
	tags    []string
	notes   string // what of its title and tags was left out
	// the row's own redirect type, expiry and click limit (Record's)
	redirect  int
	expires   time.Time
	maxClicks int64
	rules     []link.Rule
	send      string // the code asked for; "" for a new one
	reason    string // why the old code is not asked for
}

type chunk struct {
	index int
	items []item
}

// Client is what Run needs of control's API: an *apiclient.Client, or a
// client in control's own process that answers as the API does (the
// console's imports). CreateBatch answers as POST /api/v1/links/batch,
// its error an *apiclient.Problem for an answer that is not 200; Lookup
// reads the tenant's link of code on the domain with host ("" for the
// platform's), its error an *apiclient.Problem with status 404 when there
// is none.
type Client interface {
	CreateBatch(ctx context.Context, reqs []apiclient.CreateRequest, key string) (*apiclient.BatchAnswer, error)
	Lookup(ctx context.Context, host, code string) (*apiclient.Link, error)
}

// Run reads every row of rd and imports it through client, chunk by chunk
// with up to Concurrency chunks in flight. Codes are kept where the API
// takes them; otherwise the link gets a new code (Recoded). Each chunk is
// sent with the Idempotency-Key "import:<digest>:<index>:a",
// and its re-coded rows, if any, as a second batch ending in ":b": both are
// decided by the file alone, so running the same import again creates
// nothing new and resumes an interrupted one.
//
// Run returns the summary; its error is for an input that could not be
// read to the end, a canceled ctx, or chunks that failed (their rows are in
// the summary as Rejected) — rows refused one by one are not errors.
func Run(ctx context.Context, rd *Reader, client Client, o Options) (*Summary, error) {
	if o.BatchSize <= 0 || o.BatchSize > 1000 {
		o.BatchSize = 1000
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Digest == "" {
		return nil, errors.New("import: no digest of the export to derive idempotency keys from")
	}
	defaults, err := defaultDomains(o.DefaultDomains)
	if err != nil {
		return nil, err
	}
	var home string
	if o.Domain != "" {
		if home, err = link.CanonicalHost(strings.TrimSpace(o.Domain)); err != nil {
			return nil, fmt.Errorf("import: domain %q: %w", o.Domain, err)
		}
	}
	u := &uploader{client: client, o: o, sum: &Summary{}, rd: rd, defaults: defaults, home: home}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	chunks := make(chan chunk, o.Concurrency)
	var wg sync.WaitGroup
	for range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range chunks {
				u.upload(ctx, c)
			}
		}()
	}
	readErr := u.produce(ctx, rd, chunks)
	close(chunks)
	wg.Wait()
	u.report()

	s := u.sum
	s.Format, s.Rows = rd.Format(), u.rows
	sort.SliceStable(s.Outcomes, func(i, j int) bool { return s.Outcomes[i].Line < s.Outcomes[j].Line })
	for _, oc := range s.Outcomes {
		switch oc.Kind {
		case Kept:
			s.Kept++
		case Existing:
			s.Existing++
		case Recoded:
			s.Recoded++
		case Duplicate:
			s.Dups++
		case Rejected:
			s.Rejected++
		}
	}
	if err := ctx.Err(); err != nil {
		return s, fmt.Errorf("interrupted after reading %d rows (%v): run the same import again to finish; what was imported replays", s.Rows, err)
	}
	var errs []error
	if readErr != nil {
		errs = append(errs, fmt.Errorf("read export: %w", readErr))
	}
	if s.Failed > 0 {
		errs = append(errs, fmt.Errorf("%d of %d chunks failed (their rows are in the rejects): run the same import again", s.Failed, s.Chunks))
	}
	return s, errors.Join(errs...)
}

type uploader struct {
	client   Client
	o        Options
	rd       *Reader
	defaults map[string]bool // canonical hosts of the export's own default domain
	home     string          // where rows without a domain of their own go (Options.Domain)

	progress sync.Mutex // serializes o.Progress calls

	mu   sync.Mutex
	sum  *Summary
	done int
	imp  int
	rej  int
	rows int
}

func (u *uploader) add(ocs ...Outcome) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.addLocked(ocs...)
}

func (u *uploader) addLocked(ocs ...Outcome) {
	u.sum.Outcomes = append(u.sum.Outcomes, ocs...)
	u.done += len(ocs)
	for _, oc := range ocs {
		switch oc.Kind {
		case Kept, Existing, Recoded:
			u.imp++
		case Rejected:
			u.rej++
		}
	}
}

func (u *uploader) report() {
	if u.o.Progress == nil {
		return
	}
	u.progress.Lock()
	defer u.progress.Unlock()
	u.mu.Lock()
	p := Progress{BytesRead: u.rd.BytesRead(), BytesTotal: u.o.BytesTotal, Rows: u.rows, Done: u.done, Imported: u.imp, Rejected: u.rej}
	u.mu.Unlock()
	u.o.Progress(p)
}

type seen struct {
	line int
	url  string
}

// produce reads rows, settles what it can locally (malformed rows,
// duplicate codes) and cuts the rest into chunks; the cut depends only on
// the file, so chunk indexes (and keys) are the same on every run.
func (u *uploader) produce(ctx context.Context, rd *Reader, out chan<- chunk) error {
	codes := make(map[string]seen)
	var cur chunk
	body := 0
	flush := func() bool {
		if len(cur.items) == 0 {
			return true
		}
		select {
		case out <- cur:
		case <-ctx.Done():
			return false
		}
		u.mu.Lock()
		u.sum.Chunks++
		u.mu.Unlock()
		cur = chunk{index: cur.index + 1}
		body = 0
		return true
	}
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			flush()
			return err
		}
		u.mu.Lock()
		u.rows++
		u.mu.Unlock()
		if rec.Err != nil {
			u.add(Outcome{Line: rec.Line, Domain: truncate(rec.Domain, 80), OldCode: rec.Code, URL: rec.URL, Kind: Rejected, Reason: rec.Err.Error()})
			continue
		}
		if reason := checkURL(rec.URL); reason != "" {
			u.add(Outcome{Line: rec.Line, Domain: truncate(rec.Domain, 80), OldCode: rec.Code, URL: truncate(rec.URL, 200), Kind: Rejected, Reason: reason})
			continue
		}
		dom, reason := u.domain(rec.Domain)
		if reason != "" {
			u.add(Outcome{Line: rec.Line, Domain: truncate(rec.Domain, 80), OldCode: rec.Code, URL: rec.URL, Kind: Rejected, Reason: reason})
			continue
		}
		it := item{line: rec.Line, domain: dom, oldCode: rec.Code, url: rec.URL,
			redirect: rec.RedirectType, expires: rec.ExpiresAt, maxClicks: rec.MaxClicks, rules: rec.Rules}
		var notes []string
		it.title, it.tags, notes = cleanMeta(rec.Title, rec.Tags)
		it.notes = strings.Join(append(notes, rec.Notes...), "; ")
		if rec.Code != "" {
			// Codes are unique per domain: the same code on two
			// domains is two links.
			key := dom + "/" + rec.Code
			if prev, ok := codes[key]; ok {
				if prev.url == rec.URL {
					u.add(Outcome{Line: rec.Line, Domain: dom, OldCode: rec.Code, URL: rec.URL, Kind: Duplicate, Reason: fmt.Sprintf("same code and URL as line %d", prev.line)})
				} else {
					u.add(Outcome{Line: rec.Line, Domain: dom, OldCode: rec.Code, URL: rec.URL, Kind: Rejected,
						Reason: fmt.Sprintf("code %q is already used on line %d for another URL", rec.Code, prev.line)})
				}
				continue
			}
			codes[key] = seen{rec.Line, rec.URL}
			if link.ValidCodeSyntax(rec.Code) {
				it.send = rec.Code
			} else {
				it.reason = fmt.Sprintf("code %q is not %d to %d characters of 0-9, A-Z, a-z, '-' or '_'", truncate(rec.Code, 40), link.MinCodeLen, link.MaxCodeLen)
			}
		} else {
			it.reason = "no code in the export"
		}
		size := 2*len(it.url) + len(it.send) + len(it.domain) + 6*len(it.title) + 80 + rulesSize(it.rules) // JSON may escape some bytes
		for _, t := range it.tags {
			size += 6*len(t) + 3
		}
		if len(cur.items) == u.o.BatchSize || body+size > maxBatchBody {
			if !flush() {
				return ctx.Err()
			}
		}
		cur.items = append(cur.items, it)
		body += size
	}
	if !flush() {
		return ctx.Err()
	}
	return nil
}

// checkURL refuses locally what the API would refuse anyway and what
// would not fit a batch: empty, oversized, not UTF-8, control characters
// or spaces. Everything else is the API's to judge.
func checkURL(s string) string {
	switch {
	case s == "":
		return "no URL"
	case len(s) > maxURL:
		return fmt.Sprintf("URL longer than %d bytes", maxURL)
	case !utf8.ValidString(s):
		return "URL is not valid UTF-8"
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] == 0x7f {
			return "URL contains a control character or a space"
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func (u *uploader) key(index int, pass string) string {
	return fmt.Sprintf("import:%s:%d:%s", u.o.Digest, index, pass)
}

func (u *uploader) request(code string, it item) apiclient.CreateRequest {
	r := apiclient.CreateRequest{Domain: it.domain, URL: it.url, Code: code, Namespace: u.o.Namespace, RedirectType: u.o.RedirectType,
		Title: it.title, Tags: it.tags, MaxClicks: it.maxClicks, Rules: wireRules(it.rules)}
	if it.redirect != 0 {
		r.RedirectType = it.redirect // the row's own beats the import's
	}
	if !it.expires.IsZero() {
		r.ExpiresAt = it.expires.Format(time.RFC3339Nano)
	}
	return r
}

func joinReasons(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// cleanMeta keeps what of a row's title and tags this system can hold,
// rather than refuse the link for them, and says what it left out: tags
// that are not tags here (links.NormalizeTag) and those past
// links.MaxTags are dropped, a title is cut at links.MaxTitleLen
// characters and its control characters (line breaks) made spaces.
func cleanMeta(title string, tags []string) (string, []string, []string) {
	var notes, kept, dropped []string
	for _, t := range tags {
		n, err := links.NormalizeTag(t)
		switch {
		case err != nil:
			dropped = append(dropped, truncate(t, 40))
		case !slices.Contains(kept, n):
			kept = append(kept, n)
		}
	}
	if len(kept) > links.MaxTags {
		dropped = append(dropped, kept[links.MaxTags:]...)
		kept = kept[:links.MaxTags]
	}
	if len(dropped) > 0 {
		notes = append(notes, fmt.Sprintf("tags dropped: %q", dropped))
	}
	title = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(title, "\uFFFD"))
	if n := utf8.RuneCountInString(title); n > links.MaxTitleLen {
		title = string([]rune(title)[:links.MaxTitleLen])
		notes = append(notes, fmt.Sprintf("title cut from %d to %d characters", n, links.MaxTitleLen))
	}
	return strings.TrimSpace(title), kept, notes
}

// upload imports one chunk: the batch with the codes to keep, then, if
// some codes could not be kept, a second batch of those rows without
// codes.
func (u *uploader) upload(ctx context.Context, c chunk) {
	defer u.report()
	reqs := make([]apiclient.CreateRequest, len(c.items))
	for i, it := range c.items {
		reqs[i] = u.request(it.send, it)
	}
	ans, err := u.client.CreateBatch(ctx, reqs, u.key(c.index, "a"))
	if err != nil {
		u.fail(c.items, err)
		return
	}
	var out []Outcome
	var again []item
	var unsure error // a taken code could not be looked up
	for i, r := range ans.Results {
		it := c.items[i]
		oc := Outcome{Line: it.line, Domain: it.domain, OldCode: it.oldCode, URL: it.url}
		switch {
		case r.Status == http.StatusCreated && r.Link != nil:
			oc.NewCode = r.Link.Code
			oc.Kind, oc.Reason = Recoded, joinReasons(it.reason, it.notes)
			if it.send != "" && r.Link.Code == it.send {
				oc.Kind, oc.Reason = Kept, it.notes
			}
			out = append(out, oc)
		case it.send != "" && r.Status == http.StatusConflict:
			// The code is taken: by this tenant's same link from an
			// earlier import (keep it), or by another (re-code).
			l, err := u.lookup(ctx, it.domain, it.send)
			if err == nil && l.URLOriginal == it.url && l.Status != "deleted" {
				oc.NewCode, oc.Kind, oc.Reason = l.Code, Existing, "the code already had this URL"
				out = append(out, oc)
				continue
			}
			if err != nil && apiclient.StatusOf(err) != http.StatusNotFound {
				unsure = err
			}
			it.reason = fmt.Sprintf("code %q is taken", it.send)
			again = append(again, it)
		case it.send != "" && r.Status == http.StatusBadRequest:
			// The URL may be what is wrong: the second batch, without
			// the code, tells.
			it.reason = "code not accepted: " + problemDetail(r.Error)
			again = append(again, it)
		default:
			oc.Kind, oc.Reason = Rejected, u.refusal(it, r.Error)
			out = append(out, oc)
		}
	}
	replayed := ans.Replayed
	if unsure != nil && len(again) > 0 {
		// The second batch's rows depend on every lookup: send it only
		// once they all answered, so a later run sends the same batch.
		u.add(out...)
		u.fail(again, fmt.Errorf("look up a taken code: %w", unsure))
		return
	}
	if len(again) > 0 {
		reqs = reqs[:0]
		for _, it := range again {
			reqs = append(reqs, u.request("", it))
		}
		ans2, err := u.client.CreateBatch(ctx, reqs, u.key(c.index, "b"))
		if err != nil {
			u.add(out...)
			u.fail(again, err)
			return
		}
		replayed = replayed && ans2.Replayed
		for i, r := range ans2.Results {
			it := again[i]
			oc := Outcome{Line: it.line, Domain: it.domain, OldCode: it.oldCode, URL: it.url, Kind: Recoded, Reason: joinReasons(it.reason, it.notes)}
			if r.Status == http.StatusCreated && r.Link != nil {
				oc.NewCode = r.Link.Code
			} else {
				oc.Kind, oc.Reason = Rejected, u.refusal(it, r.Error)
			}
			out = append(out, oc)
		}
	}
	u.mu.Lock()
	u.addLocked(out...)
	if replayed {
		u.sum.Replayed++
	}
	u.mu.Unlock()
}

// fail records a chunk the API did not take: none of its rows was
// imported by this request.
func (u *uploader) fail(items []item, err error) {
	reason := "batch failed: " + err.Error()
	if apiclient.StatusOf(err) == http.StatusConflict {
		reason = "batch refused: this chunk was imported before with different content or options (same file, another --batch-size, --namespace or --redirect-type?): " + err.Error()
	}
	ocs := make([]Outcome, len(items))
	for i, it := range items {
		ocs[i] = Outcome{Line: it.line, Domain: it.domain, OldCode: it.oldCode, URL: it.url, Kind: Rejected, Reason: reason}
	}
	u.mu.Lock()
	u.addLocked(ocs...)
	u.sum.Failed++
	u.mu.Unlock()
}

func problemDetail(p *apiclient.Problem) string {
	if p == nil {
		return "no answer for this link"
	}
	d := p.Detail
	if d == "" {
		d = p.Title
	}
	return fmt.Sprintf("%d: %s", p.Status, strings.TrimSpace(d))
}
