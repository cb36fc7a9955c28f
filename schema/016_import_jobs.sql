-- Bulk imports started in the creator console (control/importjobs): the
-- uploaded export, who started it, its state and progress, and its
-- summary, mapping and rejects files. Any control instance can show a job
-- (a browser behind a load balancer polls whichever instance it reaches);
-- one instance at a time runs it, under a lease it renews while it works.
--
-- A job whose lease ran out (its instance died) is taken again by another
-- instance and run again from the file's first row: the importer's
-- idempotency keys (derived from digest and the chunk's index) replay the
-- chunks already created, so nothing is made twice. After max_resumes such
-- takeovers a job is failed with a message instead (a file that kills its
-- instance must not take every instance down in turn).
CREATE TABLE import_jobs (
    -- Random, so ids reveal nothing of other tenants' imports; every read
    -- is by (tenant, id) anyway.
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id      bigint NOT NULL REFERENCES tenants (id),
    -- The API key whose console session started it: revoking the key
    -- stops the job (a running one at its next heartbeat).
    key_id         bigint NOT NULL REFERENCES api_keys (id),
    file_name      text NOT NULL CHECK (length(file_name) <= 255),
    file_size      bigint NOT NULL CHECK (file_size > 0),
    -- The upload itself, until the job has finished (done or failed);
    -- the mapping and rejects files keep what became of every row.
    file           bytea CHECK (octet_length(file) <= 64 * 1024 * 1024),
    -- The import's identity in its idempotency keys: the file and every
    -- option that changes what is sent (control/importjobs.identity).
    digest         text NOT NULL CHECK (length(digest) = 64),
    batch_size     int NOT NULL CHECK (batch_size BETWEEN 1 AND 1000),
    -- What was asked: the source format (auto or one), the domain rows
    -- without one go on ('' the platform's), the redirect type (0 the
    -- default) and the export's own default hosts.
    format         text NOT NULL CHECK (format IN ('auto', 'bitly', 'yourls', 'shlink')),
    domain         text NOT NULL DEFAULT '',
    redirect_type  int NOT NULL DEFAULT 0 CHECK (redirect_type IN (0, 301, 302, 307, 308)),
    default_domains text[] NOT NULL DEFAULT '{}',
    state          text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
    lease_owner    text,
    lease_until    timestamptz,
    resumes        int NOT NULL DEFAULT 0,
    -- Progress, written with each heartbeat; the final counts at the end.
    detected_format text NOT NULL DEFAULT '',
    bytes_read     bigint NOT NULL DEFAULT 0,
    rows_read      int NOT NULL DEFAULT 0,
    rows_done      int NOT NULL DEFAULT 0,
    imported       int NOT NULL DEFAULT 0,
    rejected       int NOT NULL DEFAULT 0,
    kept           int NOT NULL DEFAULT 0,
    existing       int NOT NULL DEFAULT 0,
    recoded        int NOT NULL DEFAULT 0,
    duplicates     int NOT NULL DEFAULT 0,
    chunks         int NOT NULL DEFAULT 0,
    replayed       int NOT NULL DEFAULT 0,
    failed_chunks  int NOT NULL DEFAULT 0,
    -- The importer's own CSV files (importer.MappingHeader and
    -- RejectsHeader), as it wrote them; the console guards cells against
    -- spreadsheet formulas when it serves them.
    mapping        bytea,
    rejects        bytea,
    -- Why it failed, or what the user should know of a finished one.
    message        text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    started_at     timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    CHECK ((state = 'running') = (lease_owner IS NOT NULL AND lease_until IS NOT NULL)),
    CHECK ((state IN ('done', 'failed')) = (finished_at IS NOT NULL)),
    CHECK (state IN ('done', 'failed') OR file IS NOT NULL)
);

-- A tenant's recent jobs (the console's list), and its active ones.
CREATE INDEX import_jobs_tenant ON import_jobs (tenant_id, created_at DESC);
-- What runners claim: queued jobs and running ones whose lease may run out.
CREATE INDEX import_jobs_open ON import_jobs (created_at) WHERE state IN ('queued', 'running');
-- The retention purge.
CREATE INDEX import_jobs_finished ON import_jobs (finished_at) WHERE finished_at IS NOT NULL;
