package links

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/passhash"
)

// A link's extras on the write path (docs/rules.md): its routing rules,
// checked and normalized as its own target is, its password, hashed here
// and never kept, and its click limit, into the link.Extras the edges get.

// MaxBatchPasswords bounds the password-protected links of one batch
// create: each costs a hash of PasswordParams' memory and about 80 ms of a
// core (shared/passhash), so a batch of 1,000 would hold a request for
// over a minute.
const MaxBatchPasswords = 100

// DefaultHashers is how many passwords the service hashes at once unless
// Config.Hashers says otherwise: each takes passhash.Default's 19 MiB while
// it runs, so memory for hashing stays bounded however many creates
// arrive together.
const DefaultHashers = 2

// normalizeRules checks a creator's rules and returns them as they are
// stored: each target normalized as a link's (NormalizeURL, under the
// service's policy), devices, countries and languages in canonical case
// and ascending order. Errors are *link.RuleError naming the rule and the
// field (rules[2].country[1]), wrapping link.ErrInvalidInput.
func (s *Service) normalizeRules(rules []link.Rule) ([]link.Rule, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	if len(rules) > link.MaxRules {
		return nil, fmt.Errorf("%w: rules: %d rules, at most %d (the first that matches a request wins)", link.ErrInvalidInput, len(rules), link.MaxRules)
	}
	out := make([]link.Rule, len(rules))
	for i, r := range rules {
		n := link.Rule{Query: slices.Clone(r.Query)}
		var seen uint8
		for j, d := range r.Devices {
			field := fmt.Sprintf("device[%d]", j)
			if !d.Valid() {
				return nil, &link.RuleError{Rule: i, Field: field, Msg: "devices are " + strings.Join(link.DeviceNames(), ", ")}
			}
			if seen&(1<<d) != 0 {
				return nil, &link.RuleError{Rule: i, Field: field, Msg: d.String() + " is listed twice"}
			}
			seen |= 1 << d
		}
		for d := link.Device(1); d.Valid(); d++ {
			if seen&(1<<d) != 0 {
				n.Devices = append(n.Devices, d)
			}
		}
		var err error
		if n.Countries, err = canonicalCodes(i, "country", r.Countries, link.MaxRuleCountries, link.CanonicalCountry,
			"an ISO 3166-1 alpha-2 country code (US, DE, GB)"); err != nil {
			return nil, err
		}
		if n.Languages, err = canonicalCodes(i, "language", r.Languages, link.MaxRuleLanguages, link.CanonicalLanguage,
			"an ISO 639-1 language code (en, de, pt)"); err != nil {
			return nil, err
		}
		if r.URL == "" {
			return nil, &link.RuleError{Rule: i, Field: "url", Msg: "a rule needs a target url"}
		}
		if n.URL, err = s.normalizeURL(r.URL); err != nil {
			return nil, &link.RuleError{Rule: i, Field: "url", Msg: strings.TrimPrefix(err.Error(), link.ErrInvalidURL.Error()+": ")}
		}
		out[i] = n
	}
	// What is left (conditions present, query names and values, bounds)
	// is the wire form's own check.
	if err := link.CheckRules(out); err != nil {
		return nil, err
	}
	return out, nil
}

// canonicalCodes returns codes in canonical case, ascending, refusing an
// unknown code or one listed twice by its index as sent.
func canonicalCodes(rule int, name string, codes []string, limit int, canonical func(string) (string, bool), what string) ([]string, error) {
	if len(codes) == 0 {
		return nil, nil
	}
	if len(codes) > limit {
		return nil, &link.RuleError{Rule: rule, Field: name, Msg: fmt.Sprintf("%d codes, at most %d", len(codes), limit)}
	}
	out := make([]string, 0, len(codes))
	for j, c := range codes {
		field := fmt.Sprintf("%s[%d]", name, j)
		cc, ok := canonical(c)
		if !ok {
			hint := ""
			if name == "country" && strings.EqualFold(c, "uk") {
				hint = "; the United Kingdom is GB"
			}
			return nil, &link.RuleError{Rule: rule, Field: field, Msg: fmt.Sprintf("%.16q is not %s%s", c, what, hint)}
		}
		if slices.Contains(out, cc) {
			return nil, &link.RuleError{Rule: rule, Field: field, Msg: cc + " is listed twice"}
		}
		out = append(out, cc)
	}
	slices.Sort(out)
	return out, nil
}

// checkMaxClicks refuses a click limit out of range; 0 is none.
func checkMaxClicks(n int64) error {
	if n < 0 || n > link.MaxClicksLimit {
		return fmt.Errorf("%w: max_clicks must be 1 to %d (or left out for no limit), not %d", link.ErrInvalidInput, int64(link.MaxClicksLimit), n)
	}
	return nil
}

// hashPassword checks a password and returns its hash, waiting for one of
// the service's hashers (or ctx).
func (s *Service) hashPassword(ctx context.Context, password string) (string, error) {
	if err := passhash.CheckPassword(password); err != nil {
		return "", fmt.Errorf("password: %w", err)
	}
	select {
	case s.hashers <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("%w: hash password: %w", link.ErrUnavailable, ctx.Err())
	}
	defer func() { <-s.hashers }()
	h, err := passhash.Hash([]byte(password), s.cfg.PasswordParams, nil)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return h, nil
}

// extras validates a create's rules, password and click limit and returns
// the link's extras, its password hashed.
func (s *Service) extras(ctx context.Context, req *CreateRequest) (link.Extras, error) {
	var x link.Extras
	var err error
	if x.Rules, err = s.normalizeRules(req.Rules); err != nil {
		return x, err
	}
	if err := checkMaxClicks(req.MaxClicks); err != nil {
		return x, err
	}
	x.MaxClicks = req.MaxClicks
	if req.Password != "" {
		if x.PasswordHash, err = s.hashPassword(ctx, req.Password); err != nil {
			return x, err
		}
	}
	// The wire form's bound holds for every valid set; checked all the
	// same, so nothing is stored that edges would refuse.
	if _, err := link.AppendExtras(nil, &x); err != nil {
		return x, err
	}
	return x, nil
}

// updateExtras fills c with u's changes to rules, password and click
// limit, validated, the password hashed.
func (s *Service) updateExtras(ctx context.Context, u *Update, c *Change) error {
	if u.Rules != nil {
		rules, err := s.normalizeRules(*u.Rules)
		if err != nil {
			return err
		}
		c.SetRules, c.Rules = true, rules
	}
	if u.MaxClicks != nil {
		if err := checkMaxClicks(*u.MaxClicks); err != nil {
			return err
		}
		c.SetMaxClicks, c.MaxClicks = true, *u.MaxClicks
	}
	if u.Password != nil {
		c.SetPassword = true
		if *u.Password != "" {
			h, err := s.hashPassword(ctx, *u.Password)
			if err != nil {
				return err
			}
			c.PasswordHash = h
		}
	}
	return nil
}

// writeExtras hashes what of a link's extras decides a replay: its rules
// (normalized, so two spellings are one request), whether it has a
// password, and its click limit. Never the password itself, nor its hash
// (fresh salt each time): a fast hash of the password beside its argon2id
// one would undo what argon2id costs a guesser. So a retry with the same
// key and another password is answered the link as first made. Only when
// there are any, so keys stored before extras still match their retries.
func writeExtras(h interface{ Write([]byte) (int, error) }, x *link.Extras) {
	if x.IsZero() {
		return
	}
	rules, _ := link.AppendRules(nil, x.Rules) // checked when the link was
	fmt.Fprintf(h, "extras\x00%x\x00%t\x00%d\x00", rules, x.PasswordHash != "", x.MaxClicks)
}

// countPasswords is how many requests of a batch set a password.
func countPasswords(reqs []CreateRequest) int {
	n := 0
	for i := range reqs {
		if reqs[i].Password != "" {
			n++
		}
	}
	return n
}

var errBatchPasswords = errors.New("too many passwords in one batch")

func batchPasswordsError(n int) error {
	return fmt.Errorf("%w: %w: %d links set a password, at most %d a batch (each is hashed with argon2id); send them in smaller batches",
		link.ErrInvalidInput, errBatchPasswords, n, MaxBatchPasswords)
}
