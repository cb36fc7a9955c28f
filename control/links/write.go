package links

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/edgelink/edgelink/shared/link"
)

// item is one link on its way into a write transaction, and its answer.
type item struct {
	link   *Link
	domain link.Domain // the link's, resolved
	custom bool
	key    string // idempotency key, "" for none
	hash   []byte

	res Created
	err error

	// ids are every ID this item was given, so each can be released once
	// (see IDSource.Done) when the operation's writes have ended.
	ids []uint64

	// Coalescer bookkeeping, guarded by its mutex until done is closed.
	done   chan struct{}
	taken  bool
	leader *item // same key and request as leader, which alone is written
}

// requestHash is what a replay must match: everything that decides the link
// a create makes, after normalization, so two spellings of one request are
// one request.
func requestHash(kind string, l *Link, code string) []byte {
	h := sha256.New()
	writeHashed(h, kind, l, code)
	return h.Sum(nil)
}

func writeHashed(h interface{ Write([]byte) (int, error) }, kind string, l *Link, code string) {
	expires := "never"
	if !l.ExpiresAt.IsZero() {
		expires = strconv.FormatInt(l.ExpiresAt.UnixMicro(), 10)
	}
	// NUL separates fields: no validated field can contain it.
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00%s\x00%s\x00", kind, l.URL, expires, l.RedirectType, code, l.Namespace)
	// Only off the platform's domain, so a key stored before domains
	// existed still matches its retry.
	if l.DomainID != link.DefaultDomain {
		fmt.Fprintf(h, "domain\x00%d\x00", l.DomainID)
	}
	// Only when there are any, so a key stored before links had titles and
	// tags still matches its retry.
	writeMeta(h, l.Title, l.Tags)
	writeExtras(h, &l.Extras)
}

// writeMeta hashes a title and tags, when there are any: the title is a
// line (no NUL) and tags are normalized, so NUL separates them too.
func writeMeta(h interface{ Write([]byte) (int, error) }, title string, tags []string) {
	if title == "" && len(tags) == 0 {
		return
	}
	fmt.Fprintf(h, "meta\x00%q\x00%d\x00%s\x00", title, len(tags), strings.Join(tags, "\x00"))
}

// write writes its and answers each: in one transaction when an
// idempotency key must commit with its links; without keys every statement
// is atomic on its own, so they run without BEGIN and COMMIT. A failed
// write is answered by retryAlone. Each item gets a fresh ID: a retry never
// reuses one that a failed statement may have committed.
func (s *Service) write(ctx context.Context, its []*item) {
	// IDs are taken before any connection is held: an ID source that must
	// itself reach the database (a segment load) never waits for a
	// connection that a transaction waiting on it holds.
	for _, it := range its {
		it.link.ID = 0
		_ = s.assignID(ctx, it) // a failure is retried, and answered, by insertAll
	}
	var err error
	if keyed(its) {
		if err = s.store.WriteTx(ctx, func(tx Tx) error { return s.writeItems(ctx, tx, its) }); err != nil {
			for _, it := range its {
				it.res = Created{} // rolled back: none of it stands
			}
		}
	} else {
		// What runs before an error commits, and those links stand.
		err = s.writeItems(ctx, s.store.Autocommit(), its)
	}
	if err != nil {
		s.retryAlone(ctx, its, err)
	}
}

func keyed(its []*item) bool {
	for _, it := range its {
		if it.key != "" {
			return true
		}
	}
	return false
}

// retryAlone answers a shared write that failed with err (a deadlock with
// another instance, a lost connection): each create it did not commit is
// written again on its own, with a new ID, so one create's trouble cannot
// fail the others. A create that was written alone is answered err.
func (s *Service) retryAlone(ctx context.Context, its []*item, err error) {
	if len(its) > 1 {
		s.cfg.Log.Warn("shared create transaction failed; retrying its creates one by one", "creates", len(its), "err", err)
	}
	for _, it := range its {
		switch {
		case it.res.Link != nil: // committed before the failure
		case len(its) == 1:
			it.res, it.err = Created{}, err
		default:
			s.write(ctx, []*item{it})
		}
	}
}

// writeCreates writes creates the coalescer took together and answers
// each; their IDs are released once the last write has ended.
func (s *Service) writeCreates(ctx context.Context, its []*item) {
	s.write(ctx, its)
	s.releaseIDs(its)
}

// writeItems writes its in tx: it claims their idempotency keys, answers
// those whose key a committed request holds, inserts the rest and records
// the answers under their keys. Keys in its must be distinct, and so must
// custom codes. It fails only when the transaction must roll back.
func (s *Service) writeItems(ctx context.Context, tx Tx, its []*item) error {
	var (
		keyed []*item
		keys  []IdemKey
		write = make([]*item, 0, len(its))
	)
	for _, it := range its {
		it.res, it.err = Created{}, nil
		if it.key == "" {
			write = append(write, it)
			continue
		}
		keyed = append(keyed, it)
		keys = append(keys, IdemKey{TenantID: it.link.TenantID, Key: it.key, Hash: it.hash})
	}
	claimed, err := tx.ClaimKeys(ctx, keys)
	if err != nil {
		return err
	}
	var (
		owned   []*item
		ownedID []IdemKeyID
		lookups []IdemKeyID
		waiting []*item
	)
	for i, it := range keyed {
		id := IdemKeyID{TenantID: it.link.TenantID, Key: it.key}
		if claimed[i] {
			owned, ownedID = append(owned, it), append(ownedID, id)
			write = append(write, it)
		} else {
			lookups, waiting = append(lookups, id), append(waiting, it)
		}
	}
	if len(lookups) > 0 {
		stored, err := tx.StoredResponses(ctx, lookups)
		if err != nil {
			return err
		}
		for i, it := range waiting {
			it.res, it.err = replay(stored[lookups[i]], it.hash)
		}
	}
	if err := s.insertAll(ctx, tx, write); err != nil {
		return err
	}
	responses := make([][]byte, len(owned))
	for i, it := range owned {
		if it.err == nil {
			if responses[i], err = json.Marshal(storedCreate{Link: it.res.Link}); err != nil {
				return err
			}
		}
	}
	return tx.FinishKeys(ctx, ownedID, responses)
}

// storedCreate is a create's answer as its idempotency key keeps it: the
// link as it was created, so a replay answers the same body even after the
// link changed.
type storedCreate struct {
	Link *Link `json:"link"`
}

func replay(sr StoredResponse, hash []byte) (Created, error) {
	if sr.Hash == nil {
		// The key's holder gave it up after this transaction's claim
		// lost: a retry will claim it.
		return Created{}, fmt.Errorf("%w: idempotency key in use, retry", link.ErrUnavailable)
	}
	if string(sr.Hash) != string(hash) {
		return Created{}, link.ErrIdempotencyConflict
	}
	var sc storedCreate
	if err := json.Unmarshal(sr.Response, &sc); err != nil || sc.Link == nil {
		return Created{}, fmt.Errorf("decode stored response: %w", errors.Join(err, errors.New("no link")))
	}
	return Created{Link: sc.Link, Replayed: true}, nil
}

// assignID gives it a fresh ID and remembers it for releaseIDs.
func (s *Service) assignID(ctx context.Context, it *item) error {
	id, err := s.ids.NextID(ctx, it.domain.ID)
	if err != nil {
		return err
	}
	it.link.ID = id
	it.ids = append(it.ids, id)
	return nil
}

// releaseIDs tells the ID source that every ID its were given is done: the
// one a committed link holds as committed, all others (replays, taken
// codes, rolled-back attempts) as unused. Call it once the operation's last
// write has ended.
func (s *Service) releaseIDs(its []*item) {
	for _, it := range its {
		for _, id := range it.ids {
			s.ids.Done(id, it.err == nil && it.res.Link != nil && !it.res.Replayed && it.res.Link.ID == id)
		}
		it.ids = nil
	}
}

// insertAll gives its their IDs and codes and inserts them. A generated code
// a custom link already holds is skipped (its ID is wasted, counted, never
// reused) and the link takes the next ID. Per-link failures land in the
// item; an error means the transaction must roll back.
func (s *Service) insertAll(ctx context.Context, tx Tx, its []*item) error {
	todo := its
	for round := 0; len(todo) > 0; round++ {
		batch := make([]NewLink, 0, len(todo))
		owners := make([]*item, 0, len(todo))
		for _, it := range todo {
			if round == maxGeneratedTries {
				it.err = fmt.Errorf("%w: no free generated code after %d tries", link.ErrUnavailable, maxGeneratedTries)
				continue
			}
			if round > 0 || it.link.ID == 0 {
				if err := s.assignID(ctx, it); err != nil {
					it.err = fmt.Errorf("allocate id: %w", err)
					continue
				}
			}
			if !it.custom {
				if err := s.generateCode(ctx, it); err != nil {
					it.err = fmt.Errorf("allocate id: %w", err)
					continue
				}
			}
			batch = append(batch, NewLink{Link: &it.link.Link, Domain: it.domain.ID, Custom: it.custom, Title: it.link.Title, Tags: it.link.Tags})
			owners = append(owners, it)
		}
		inserted, err := tx.InsertLinks(ctx, batch)
		if err != nil {
			return err
		}
		var again []*item
		for i, it := range owners {
			switch {
			case inserted[i]:
				it.res = Created{Link: it.link}
			case it.custom:
				it.err = link.ErrCodeTaken
			default:
				// Custom codes never take the generated shape (see
				// validateCustomCode), so only imported codes get here,
				// and on an FF1 domain codes of its earlier keys.
				s.wasted.Add(1)
				s.cfg.Log.Warn("generated code already taken; skipping id", "id", it.link.ID)
				again = append(again, it)
			}
		}
		todo = again
	}
	return nil
}

// generateCode gives it the code of its ID on its domain (codeOf), skipping
// IDs whose code is a reserved word in any case (READYZ, Status): such an ID
// is wasted, counted and never handed out, so no generated code can shadow a
// route or a policy word. A 6-character word is 64 codes in all its cases,
// so skips are rare and at most a few in a row, on an FF1 domain as on a
// sequential one (there the words sit at unrelated IDs).
func (s *Service) generateCode(ctx context.Context, it *item) error {
	for {
		code, err := s.codeOf(it.domain, it.link.ID)
		if err != nil {
			return err
		}
		if !s.reserved[lowerASCII(code)] {
			it.link.Code = code
			return nil
		}
		s.reservedSkips.Add(1)
		s.cfg.Log.Info("generated code is a reserved word; skipping id", "id", it.link.ID)
		if err := s.assignID(ctx, it); err != nil {
			return err
		}
	}
}

// MaxBatch bounds the links of one batch create.
const MaxBatch = 1000

// ItemResult is one link's outcome in a batch: Link, or Err.
type ItemResult struct {
	Link *Link
	Err  error
}

// BatchResult is a batch create's answer.
type BatchResult struct {
	Items []ItemResult
	// Replayed: an earlier batch with the same idempotency key made these
	// links, and this is its original answer.
	Replayed bool
}

// CreateBatch creates up to MaxBatch links for tenantID in one transaction,
// each link succeeding or failing on its own (invalid input, taken code).
// With an idempotency key the batch is idempotent as a whole: the same key
// with the same requests answers the original results, with other requests
// link.ErrIdempotencyConflict. An error means nothing was written.
func (s *Service) CreateBatch(ctx context.Context, tenantID int64, key string, reqs []CreateRequest) (BatchResult, error) {
	if len(reqs) == 0 || len(reqs) > MaxBatch {
		return BatchResult{}, fmt.Errorf("%w: a batch holds 1 to %d links", link.ErrInvalidInput, MaxBatch)
	}
	if len(key) > 255 {
		return BatchResult{}, fmt.Errorf("%w: Idempotency-Key is longer than 255 bytes", link.ErrInvalidInput)
	}
	if n := countPasswords(reqs); n > MaxBatchPasswords {
		return BatchResult{}, batchPasswordsError(n)
	}
	results := make([]ItemResult, len(reqs))
	its := make([]*item, len(reqs))
	var write []*item
	codes := make(map[domainCode]bool)
	domains := make(map[string]link.Domain) // by host as sent: a batch names few
	// Only a key's holder compares requests: without one nothing is hashed.
	var h hash.Hash
	if key != "" {
		h = sha256.New()
	}
	for i, req := range reqs {
		req.IdempotencyKey = ""
		l, err := s.validate(req)
		d, known := domains[req.Domain]
		if err == nil && !known {
			if d, err = s.domainFor(ctx, tenantID, req.Domain, true); err == nil {
				domains[req.Domain] = d
			}
		}
		if err == nil {
			// Last of an item's checks: a password costs a hash.
			if l.Extras, err = s.extras(ctx, &req); err == nil {
				l.PasswordProtected = l.Extras.PasswordHash != ""
			}
		}
		if err != nil {
			results[i].Err = err
			if h != nil {
				// Invalid items are part of the request too: hash what was sent.
				fmt.Fprintf(h, "invalid\x00%q\x00%q\x00%d\x00%d\x00%q\x00%q\x00", req.URL, req.Code, req.ExpiresAt.UnixMicro(), req.RedirectType, req.Namespace, err.Error())
				if req.Title != "" || len(req.Tags) > 0 {
					fmt.Fprintf(h, "meta\x00%q\x00%q\x00", req.Title, req.Tags)
				}
				if req.Domain != "" {
					fmt.Fprintf(h, "domain\x00%q\x00", req.Domain)
				}
				if len(req.Rules) > 0 || req.Password != "" || req.MaxClicks != 0 {
					fmt.Fprintf(h, "extras\x00%q\x00%t\x00%d\x00", fmt.Sprint(req.Rules), req.Password != "", req.MaxClicks)
				}
			}
			continue
		}
		l.TenantID, l.DomainID, l.Domain = tenantID, d.ID, d.Host
		if h != nil {
			writeHashed(h, "item", l, req.Code)
		}
		if req.Code != "" {
			k := domainCode{d.ID, req.Code}
			if codes[k] {
				results[i].Err = link.ErrCodeTaken
				continue
			}
			codes[k] = true
		}
		its[i] = &item{link: l, domain: d, custom: req.Code != ""}
		write = append(write, its[i])
	}
	var sum []byte
	if key != "" {
		sum = h.Sum(nil)
		// A replay (a client's retry, an import run again) needs no IDs:
		// answer it before taking any, since IDs taken are never given
		// back. A batch racing its own retry still takes IDs, and the
		// claim below still decides which one writes.
		id := IdemKeyID{TenantID: tenantID, Key: key}
		if stored, err := s.store.Autocommit().StoredResponses(ctx, []IdemKeyID{id}); err == nil {
			if sr, ok := stored[id]; ok && sr.Hash != nil {
				return replayBatch(sr, sum)
			}
		}
	}

	defer s.releaseIDs(write)
	for _, it := range write { // before any connection is held, as in write
		_ = s.assignID(ctx, it)
	}
	var out BatchResult
	inTx := s.store.WriteTx
	if key == "" {
		// Without a key nothing must commit with the links, and each
		// InsertLinks statement is atomic on its own.
		inTx = func(ctx context.Context, fn func(Tx) error) error { return fn(s.store.Autocommit()) }
	}
	err := inTx(ctx, func(tx Tx) error {
		out = BatchResult{}
		id := IdemKeyID{TenantID: tenantID, Key: key}
		if key != "" {
			claimed, err := tx.ClaimKeys(ctx, []IdemKey{{TenantID: tenantID, Key: key, Hash: sum}})
			if err != nil {
				return err
			}
			if !claimed[0] {
				stored, err := tx.StoredResponses(ctx, []IdemKeyID{id})
				if err != nil {
					return err
				}
				out, err = replayBatch(stored[id], sum)
				return err
			}
		}
		if err := s.insertAll(ctx, tx, write); err != nil {
			if key != "" {
				return err
			}
			// Without a transaction what ran before err committed: answer
			// per link, so the answer says exactly what exists.
			for _, it := range write {
				if it.res.Link == nil && it.err == nil {
					it.err = err
				}
			}
		}
		for _, it := range write {
			if key != "" && errors.Is(it.err, link.ErrUnavailable) {
				// Keep no answer that a retry could improve on: roll back
				// and let the creator retry the whole batch.
				return it.err
			}
		}
		out.Items = make([]ItemResult, len(reqs))
		for i := range reqs {
			if its[i] == nil {
				out.Items[i] = results[i]
			} else {
				out.Items[i] = ItemResult{Link: its[i].res.Link, Err: its[i].err}
			}
		}
		if key == "" {
			return nil
		}
		b, err := json.Marshal(encodeBatch(out.Items))
		if err != nil {
			return err
		}
		return tx.FinishKeys(ctx, []IdemKeyID{id}, [][]byte{b})
	})
	if err != nil {
		return BatchResult{}, err
	}
	return out, nil
}

// domainCode is a link's key: codes are unique per domain.
type domainCode struct {
	domain link.DomainID
	code   string
}

// storedItem is a batch item's answer as an idempotency key keeps it.
type storedItem struct {
	Link *Link  `json:"link,omitempty"`
	Err  string `json:"err,omitempty"` // the error's kind, see errorKinds
	Msg  string `json:"msg,omitempty"` // the error's message
}

// errorKinds are the per-item errors a stored batch answer can hold.
var errorKinds = map[string]error{
	"invalid_input": link.ErrInvalidInput,
	"invalid_url":   link.ErrInvalidURL,
	"code_taken":    link.ErrCodeTaken,
}

func encodeBatch(items []ItemResult) []storedItem {
	out := make([]storedItem, len(items))
	for i, r := range items {
		if r.Err == nil {
			out[i].Link = r.Link
			continue
		}
		out[i].Msg = r.Err.Error()
		for kind, sentinel := range errorKinds {
			if errors.Is(r.Err, sentinel) {
				out[i].Err = kind
			}
		}
	}
	return out
}

func replayBatch(sr StoredResponse, hash []byte) (BatchResult, error) {
	if sr.Hash == nil {
		return BatchResult{}, fmt.Errorf("%w: idempotency key in use, retry", link.ErrUnavailable)
	}
	if string(sr.Hash) != string(hash) {
		return BatchResult{}, link.ErrIdempotencyConflict
	}
	var stored []storedItem
	if err := json.Unmarshal(sr.Response, &stored); err != nil {
		return BatchResult{}, fmt.Errorf("decode stored batch: %w", err)
	}
	out := BatchResult{Items: make([]ItemResult, len(stored)), Replayed: true}
	for i, si := range stored {
		if si.Err == "" && si.Link != nil {
			out.Items[i].Link = si.Link
			continue
		}
		out.Items[i].Err = storedError{kind: errorKinds[si.Err], msg: si.Msg}
	}
	return out, nil
}

// storedError is a replayed item error: the original message and kind.
type storedError struct {
	kind error
	msg  string
}

func (e storedError) Error() string { return e.msg }
func (e storedError) Unwrap() error { return e.kind }
