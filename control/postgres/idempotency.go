package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/control/links"
)

// Idempotency keys live in idempotency_keys, decided by its primary key.
// A key is expired once it is older than the store's time to live (now()
// of the transaction reading it, so every statement of one transaction
// agrees): reads treat it as absent and a claim takes it over, whether or
// not a purge has deleted it yet, so what a retry gets never depends on
// when the purge last ran.

var _ links.KeyPurger = (*Store)(nil)

// ClaimKeys implements links.Tx. Keys are claimed in a fixed order so two
// transactions claiming overlapping sets queue instead of deadlocking. An
// expired key is taken over as if it were new: its old answer is dropped
// in the same statement. The conflict arbiter locks every key it finds,
// claimed or not, until the transaction ends: a replay and a take-over
// of one key queue on its row rather than both deciding.
func (t *Tx) ClaimKeys(ctx context.Context, keys []links.IdemKey) ([]bool, error) {
	claimed := make([]bool, len(keys))
	if len(keys) == 0 {
		return claimed, nil
	}
	tenants, names, hashes := make([]int64, len(keys)), make([]string, len(keys)), make([][]byte, len(keys))
	index := make(map[links.IdemKeyID]int, len(keys))
	for i, k := range keys {
		tenants[i], names[i], hashes[i] = k.TenantID, k.Key, k.Hash
		index[links.IdemKeyID{TenantID: k.TenantID, Key: k.Key}] = i
	}
	rows, err := t.tx.Query(ctx, `
		INSERT INTO idempotency_keys AS k (tenant_id, idem_key, request_hash)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::bytea[]) ORDER BY 1, 2
		ON CONFLICT (tenant_id, idem_key) DO UPDATE
		SET request_hash = excluded.request_hash, response = NULL, created_at = now()
		WHERE k.created_at < now() - make_interval(secs => $4)
		RETURNING tenant_id, idem_key`, tenants, names, hashes, t.keyTTL.Seconds())
	if err != nil {
		return nil, translate(err)
	}
	var id links.IdemKeyID
	_, err = pgx.ForEachRow(rows, []any{&id.TenantID, &id.Key}, func() error {
		claimed[index[id]] = true
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	return claimed, nil
}

// StoredResponses implements links.Tx. An expired key is missing from the
// map, as a key never sent is.
func (t *Tx) StoredResponses(ctx context.Context, keys []links.IdemKeyID) (map[links.IdemKeyID]links.StoredResponse, error) {
	out := make(map[links.IdemKeyID]links.StoredResponse, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	tenants, names := make([]int64, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		tenants[i], names[i] = k.TenantID, k.Key
	}
	rows, err := t.tx.Query(ctx, `
		SELECT k.tenant_id, k.idem_key, k.request_hash, k.response
		FROM idempotency_keys k JOIN unnest($1::bigint[], $2::text[]) AS r(tenant_id, idem_key)
		  ON k.tenant_id = r.tenant_id AND k.idem_key = r.idem_key
		WHERE k.created_at >= now() - make_interval(secs => $3)`, tenants, names, t.keyTTL.Seconds())
	if err != nil {
		return nil, translate(err)
	}
	var (
		id links.IdemKeyID
		sr links.StoredResponse
	)
	_, err = pgx.ForEachRow(rows, []any{&id.TenantID, &id.Key, &sr.Hash, &sr.Response}, func() error {
		out[id] = links.StoredResponse{Hash: append([]byte(nil), sr.Hash...), Response: append([]byte(nil), sr.Response...)}
		return nil
	})
	return out, translate(err)
}

// FinishKeys implements links.Tx.
func (t *Tx) FinishKeys(ctx context.Context, keys []links.IdemKeyID, responses [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	tenants, names := make([]int64, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		tenants[i], names[i] = k.TenantID, k.Key
	}
	_, err := t.tx.Exec(ctx, `
		WITH r AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::bytea[]) AS r(tenant_id, idem_key, response)),
		d AS (
			DELETE FROM idempotency_keys k USING r
			WHERE k.tenant_id = r.tenant_id AND k.idem_key = r.idem_key AND r.response IS NULL)
		UPDATE idempotency_keys k SET response = r.response FROM r
		WHERE k.tenant_id = r.tenant_id AND k.idem_key = r.idem_key AND r.response IS NOT NULL`,
		tenants, names, responses)
	return translate(err)
}

// PurgeExpiredKeys implements links.KeyPurger: one statement deletes up
// to limit expired keys, oldest first through the index on created_at.
// Rows locked elsewhere (another instance's purge, a claim taking the key
// over) are skipped, so purgers never wait on each other or on creates.
func (s *Store) PurgeExpiredKeys(ctx context.Context, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `
		DELETE FROM idempotency_keys
		WHERE (tenant_id, idem_key) IN (
			SELECT tenant_id, idem_key FROM idempotency_keys
			WHERE created_at < now() - make_interval(secs => $1)
			ORDER BY created_at
			LIMIT $2
			FOR UPDATE SKIP LOCKED)`, s.keyTTL.Seconds(), limit)
	if err != nil {
		return 0, translate(err)
	}
	return int(tag.RowsAffected()), nil
}
