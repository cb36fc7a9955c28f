package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgelink/edgelink/shared/link"
)

// A link's extras (shared/link Extras: rules, password hash, click limit)
// are three nullable columns of links and of its outbox rows (schema 019):
// rules in their wire form (link.AppendRules), the hash as passhash wrote
// it, the limit as a bigint; NULL each for none, so a plain link costs
// nothing. The relay and the snapshot builder put them together into the
// one wire form edges read (link.ComposeExtras) without decoding the
// rules.

// extrasArgs are a link's extras as statement arguments.
type extrasArgs struct {
	rules []byte // nil: NULL
	hash  pgtype.Text
	max   pgtype.Int8
}

func argsOf(x *link.Extras) (extrasArgs, error) {
	var a extrasArgs
	rules, err := link.AppendRules(nil, x.Rules)
	if err != nil {
		return a, fmt.Errorf("rules: %w", err)
	}
	if len(rules) > 0 {
		a.rules = rules
	}
	a.hash = pgtype.Text{String: x.PasswordHash, Valid: x.PasswordHash != ""}
	a.max = pgtype.Int8{Int64: x.MaxClicks, Valid: x.MaxClicks > 0}
	return a, nil
}

// readExtras fills the rules and click limit of x from their columns (the
// hash is not read back for the API: only whether there is one). The
// clicks counted against the limit are readCounted's.
func readExtras(x *link.Extras, rules []byte, max pgtype.Int8) error {
	var err error
	if x.Rules, err = link.DecodeRules(rules); err != nil {
		return fmt.Errorf("rules column: %w", err)
	}
	x.MaxClicks = 0
	if max.Valid {
		x.MaxClicks = max.Int64
	}
	return nil
}

// readCounted fills the clicks counted against x's limit from
// links.clicks_counted (schema 021; NULL without a limit).
func readCounted(x *link.Extras, counted pgtype.Int8) {
	x.ClicksCounted = 0
	if counted.Valid && x.MaxClicks > 0 {
		x.ClicksCounted = counted.Int64
	}
}

// composeExtras is the wire form of a row's extras columns for edges; nil
// for a plain link. counted is links.clicks_counted (schema 021): what the
// rollups had counted of a limited link, for an edge's allowance
// (docs/click-limits.md); NULL counts as none counted.
func composeExtras(rules []byte, hash pgtype.Text, max, counted pgtype.Int8) ([]byte, error) {
	if len(rules) == 0 && !hash.Valid && !max.Valid {
		return nil, nil
	}
	var n int64
	if counted.Valid && counted.Int64 > 0 {
		n = counted.Int64
	}
	return link.ComposeCountedExtras(nil, rules, hash.String, max.Int64, n)
}
