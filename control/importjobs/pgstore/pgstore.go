// Package pgstore keeps the console's import jobs in PostgreSQL
// (schema/016_import_jobs.sql): control/importjobs' Store for the console
// and Leases for its runners. Like control/console/pgstore, it is one of
// the few places in control that sees pgx errors; it translates them into
// shared/link's.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/control/importjobs"
	"github.com/edgelink/edgelink/shared/link"
)

// Store keeps import jobs in PostgreSQL. Leases are judged by the
// database's clock, the one clock every instance shares. It is safe for
// concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

var (
	_ importjobs.Store  = (*Store)(nil)
	_ importjobs.Leases = (*Store)(nil)
)

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// The job types are control/importjobs'.
type (
	job     = importjobs.Job
	newJob  = importjobs.NewJob
	claimed = importjobs.Claimed
	outcome = importjobs.Outcome
)

// jobColumns are what a Job is read from, in scanJob's order.
const jobColumns = `id::text, tenant_id, key_id, file_name, file_size, format, domain, redirect_type, default_domains,
	state, detected_format, resumes, bytes_read, rows_read, rows_done, imported, rejected,
	kept, existing, recoded, duplicates, chunks, replayed, failed_chunks,
	mapping IS NOT NULL AND position('\x0a'::bytea IN mapping) < octet_length(mapping),
	rejects IS NOT NULL AND position('\x0a'::bytea IN rejects) < octet_length(rejects),
	message, created_at, updated_at, started_at, finished_at`

// scanJob reads a row of jobColumns, then into more the columns after
// them.
func scanJob(row pgx.Row, more ...any) (job, error) {
	var j job
	var format, detected, state string
	var started, finished *time.Time
	dest := []any{&j.ID, &j.TenantID, &j.KeyID, &j.FileName, &j.FileSize, &format, &j.Domain, &j.RedirectType, &j.DefaultDomains,
		&state, &detected, &j.Resumes, &j.Progress.BytesRead, &j.Progress.Rows, &j.Progress.Done, &j.Progress.Imported, &j.Progress.Rejected,
		&j.Counts.Kept, &j.Counts.Existing, &j.Counts.Recoded, &j.Counts.Duplicates, &j.Counts.Chunks, &j.Counts.Replayed, &j.Counts.Failed,
		&j.HasMapping, &j.HasRejects, &j.Message, &j.CreatedAt, &j.UpdatedAt, &started, &finished}
	if err := row.Scan(append(dest, more...)...); err != nil {
		return job{}, err
	}
	j.Format, j.DetectedFormat, j.State = importer.Format(format), importer.Format(detected), importjobs.State(state)
	j.Progress.BytesTotal = j.FileSize
	if started != nil {
		j.StartedAt = *started
	}
	if finished != nil {
		j.FinishedAt = *finished
		j.Counts.Rows, j.Counts.Rejected = j.Progress.Rows, j.Progress.Rejected
	}
	return j, nil
}

// tenantLock is the advisory lock that serializes the checks of one
// tenant's active jobs, at upload and at claim.
const tenantLock = `hashtextextended('import_jobs/' || ($1::bigint)::text, 0)`

// Create implements importjobs.Store: a queued job for n.TenantID, unless
// the tenant already has maxActive jobs queued or running
// (importjobs.ErrTooMany); the check and the insert are serialized per
// tenant.
func (s *Store) Create(ctx context.Context, n newJob, maxActive int) (job, error) {
	if len(n.File) == 0 {
		return job{}, fmt.Errorf("%w: the file is empty", link.ErrInvalidInput)
	}
	if n.DefaultDomains == nil {
		n.DefaultDomains = []string{}
	}
	var j job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+tenantLock+`)`, n.TenantID); err != nil {
			return err
		}
		var active int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM import_jobs WHERE tenant_id = $1 AND state IN ('queued', 'running')`,
			n.TenantID).Scan(&active); err != nil {
			return err
		}
		if active >= maxActive {
			return importjobs.ErrTooMany
		}
		var err error
		j, err = scanJob(tx.QueryRow(ctx, `
			INSERT INTO import_jobs (tenant_id, key_id, file_name, file_size, file, digest, batch_size, format, domain, redirect_type, default_domains)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
			RETURNING `+jobColumns,
			n.TenantID, n.KeyID, n.FileName, len(n.File), n.File, importjobs.Identity(n.File, importjobs.BatchSize, n.Options), importjobs.BatchSize,
			string(n.Format), n.Domain, n.RedirectType, n.DefaultDomains))
		return err
	})
	if errors.Is(err, importjobs.ErrTooMany) {
		return job{}, err
	}
	if err != nil {
		return job{}, fmt.Errorf("create import job: %w", translate(err))
	}
	return j, nil
}

// Job implements importjobs.Store.
func (s *Store) Job(ctx context.Context, tenant int64, id string) (job, error) {
	if !validID(id) {
		return job{}, link.ErrNotFound
	}
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM import_jobs WHERE id = $1 AND tenant_id = $2`, id, tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		return job{}, link.ErrNotFound
	}
	if err != nil {
		return job{}, fmt.Errorf("read import job: %w", translate(err))
	}
	return j, nil
}

// Jobs implements importjobs.Store.
func (s *Store) Jobs(ctx context.Context, tenant int64, limit int) ([]job, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+jobColumns+` FROM import_jobs WHERE tenant_id = $1 ORDER BY created_at DESC, id LIMIT $2`, tenant, limit)
	if err != nil {
		return nil, fmt.Errorf("list import jobs: %w", translate(err))
	}
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (job, error) { return scanJob(row) })
	if err != nil {
		return nil, fmt.Errorf("list import jobs: %w", translate(err))
	}
	return jobs, nil
}

// Output implements importjobs.Store.
func (s *Store) Output(ctx context.Context, tenant int64, id string, which importjobs.Output) ([]byte, error) {
	col := map[importjobs.Output]string{importjobs.Mapping: "mapping", importjobs.Rejects: "rejects"}[which]
	if col == "" || !validID(id) {
		return nil, link.ErrNotFound
	}
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT `+col+` FROM import_jobs WHERE id = $1 AND tenant_id = $2 AND `+col+` IS NOT NULL`, id, tenant).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, link.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read import %s: %w", col, translate(err))
	}
	return b, nil
}

// Sweep implements importjobs.Leases: it fails the jobs that must not run again: those whose key was
// revoked before they could (queued, or their instance gone), and those
// taken over maxResumes times whose lease ran out once more. It returns
// how many.
func (s *Store) Sweep(ctx context.Context, maxResumes int) (int64, error) {
	tag, err := s.pool.Exec(ctx, `
		UPDATE import_jobs j SET state = 'failed', file = NULL, lease_owner = NULL, lease_until = NULL,
			finished_at = now(), updated_at = now(),
			message = CASE WHEN k.revoked_at IS NOT NULL
				THEN 'The API key that started this import was revoked, so it was stopped. Links it made before stay.'
				ELSE format('This import was interrupted %s times (the control instance running it stopped) and was not started again. Links it made stay; upload the same file with the same options to finish it: what was imported is replayed, not made twice.', j.resumes + 1)
			END
		FROM api_keys k
		WHERE k.id = j.key_id
		  AND (j.state = 'queued' OR (j.state = 'running' AND j.lease_until < now()))
		  AND (k.revoked_at IS NOT NULL OR (j.state = 'running' AND j.resumes >= $1))`, maxResumes)
	if err != nil {
		return 0, fmt.Errorf("sweep import jobs: %w", translate(err))
	}
	return tag.RowsAffected(), nil
}

// Claim implements importjobs.Leases: it takes the oldest job this instance may run, under a lease of
// lease held by owner: a queued job, or a running one whose lease ran out
// (a takeover, counted in resumes), of a tenant with fewer than
// perTenant jobs running under live leases. Nil when there is none.
func (s *Store) Claim(ctx context.Context, owner string, lease time.Duration, perTenant int) (*claimed, error) {
	var c *claimed
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT id::text, tenant_id FROM import_jobs
			WHERE state = 'queued' OR (state = 'running' AND lease_until < now())
			ORDER BY created_at, id LIMIT 16 FOR UPDATE SKIP LOCKED`)
		if err != nil {
			return err
		}
		type candidate struct {
			id     string
			tenant int64
		}
		cands, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (candidate, error) {
			var c candidate
			return c, r.Scan(&c.id, &c.tenant)
		})
		if err != nil {
			return err
		}
		for _, cand := range cands {
			// Try, never wait: two instances checking tenants in
			// different orders must not deadlock; the other one claims.
			var locked bool
			if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(`+tenantLock+`)`, cand.tenant).Scan(&locked); err != nil {
				return err
			}
			if !locked {
				continue
			}
			var running int
			if err := tx.QueryRow(ctx, `
				SELECT count(*) FROM import_jobs
				WHERE tenant_id = $1 AND state = 'running' AND lease_until >= now() AND id <> $2`, cand.tenant, cand.id).Scan(&running); err != nil {
				return err
			}
			if running >= perTenant {
				continue
			}
			var cl claimed
			row := tx.QueryRow(ctx, `
				UPDATE import_jobs SET
					resumes = resumes + CASE WHEN state = 'running' THEN 1 ELSE 0 END,
					state = 'running', lease_owner = $2, lease_until = now() + $3::interval,
					started_at = coalesce(started_at, now()), updated_at = now(),
					bytes_read = 0, rows_read = 0, rows_done = 0, imported = 0, rejected = 0
				WHERE id = $1
				RETURNING `+jobColumns+`, file, digest, batch_size`, cand.id, owner, lease)
			cl.Job, err = scanJob(row, &cl.File, &cl.Digest, &cl.Batch)
			if err != nil {
				return err
			}
			c = &cl
			return nil
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim an import job: %w", translate(err))
	}
	return c, nil
}

// Heartbeat implements importjobs.Leases: it renews owner's lease of job id and writes its progress. alive
// is false when owner no longer holds it (another instance took it over,
// or it was failed); revoked is true when the job's key was revoked.
func (s *Store) Heartbeat(ctx context.Context, id, owner string, lease time.Duration, p importer.Progress) (alive, revoked bool, err error) {
	err = s.pool.QueryRow(ctx, `
		UPDATE import_jobs j SET lease_until = now() + $3::interval, updated_at = now(),
			bytes_read = $4, rows_read = $5, rows_done = $6, imported = $7, rejected = $8
		WHERE id = $1 AND lease_owner = $2 AND state = 'running'
		RETURNING EXISTS (SELECT 1 FROM api_keys k WHERE k.id = j.key_id AND k.revoked_at IS NOT NULL)`,
		id, owner, lease, p.BytesRead, p.Rows, p.Done, p.Imported, p.Rejected).Scan(&revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("renew import lease: %w", translate(err))
	}
	return true, revoked, nil
}

// Finish implements importjobs.Leases: it writes the outcome of owner's run of job id and drops its file;
// false when owner no longer held the lease (nothing was written).
func (s *Store) Finish(ctx context.Context, id, owner string, o outcome) (bool, error) {
	c, p := o.Counts, o.Progress
	tag, err := s.pool.Exec(ctx, `
		UPDATE import_jobs SET state = $3, message = $4, detected_format = $5,
			bytes_read = $6, rows_read = $7, rows_done = $8, imported = $9, rejected = $10,
			kept = $11, existing = $12, recoded = $13, duplicates = $14, chunks = $15, replayed = $16, failed_chunks = $17,
			mapping = $18, rejects = $19,
			file = NULL, lease_owner = NULL, lease_until = NULL, finished_at = now(), updated_at = now()
		WHERE id = $1 AND lease_owner = $2 AND state = 'running'`,
		id, owner, string(o.State), o.Message, string(o.Format),
		p.BytesRead, p.Rows, p.Done, p.Imported, p.Rejected,
		c.Kept, c.Existing, c.Recoded, c.Duplicates, c.Chunks, c.Replayed, c.Failed,
		o.Mapping, o.Rejects)
	if err != nil {
		return false, fmt.Errorf("finish import job: %w", translate(err))
	}
	return tag.RowsAffected() == 1, nil
}

// Release implements importjobs.Leases: it gives owner's job id back to the queue (an instance shutting
// down): another instance starts it again at once, not counted as a
// resume.
func (s *Store) Release(ctx context.Context, id, owner string) error {
	_, err := s.pool.Exec(ctx, `
		UPDATE import_jobs SET state = 'queued', lease_owner = NULL, lease_until = NULL, updated_at = now()
		WHERE id = $1 AND lease_owner = $2 AND state = 'running'`, id, owner)
	if err != nil {
		return fmt.Errorf("release import job: %w", translate(err))
	}
	return nil
}

// Purge implements importjobs.Leases: it deletes jobs that finished longer than retention ago, with their
// outputs, and queued ones that waited that long (no instance runs
// imports), and says how many.
func (s *Store) Purge(ctx context.Context, retention time.Duration) (int64, error) {
	tag, err := s.pool.Exec(ctx, `
		DELETE FROM import_jobs
		WHERE (finished_at IS NOT NULL AND finished_at < now() - $1::interval)
		   OR (state = 'queued' AND created_at < now() - $1::interval)`, retention)
	if err != nil {
		return 0, fmt.Errorf("purge import jobs: %w", translate(err))
	}
	return tag.RowsAffected(), nil
}

// translate marks the driver errors that mean the database is unreachable
// or shutting down as link.ErrUnavailable.
func translate(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P03" || pgErr.Code == "53300" {
			return fmt.Errorf("%w: %v", link.ErrUnavailable, err)
		}
		return err
	}
	if pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
		return fmt.Errorf("%w: %v", link.ErrUnavailable, err)
	}
	return err
}

// validID is whether id can be a job's id (a UUID in its canonical text
// form): anything else names no job and is never sent to the database.
func validID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
