-- Segment allocation: one authoritative high-water row per namespace and an
-- audit of every confirmed [seg_start, seg_end) interval. IDs are global (the
-- links primary key), so namespaces own disjoint, pre-partitioned ranges and
-- every audited interval is disjoint from every other, whatever its namespace:
-- both are enforced here with exclusion constraints, as a last line behind
-- the counter-row transaction.

CREATE TABLE alloc_namespaces (
    namespace   text COLLATE "C" PRIMARY KEY CHECK (namespace ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    -- next_id is the next unallocated ID (not Leaf's max_id): the next
    -- segment starts here. next_id = upper_bound means exhausted.
    next_id     bigint NOT NULL,
    step        bigint NOT NULL CHECK (step BETWEEN 1 AND 100000000),
    lower_bound bigint NOT NULL CHECK (lower_bound >= 1),
    -- exclusive; 62^6 = 56800235584 lets ID 62^6 - 1 be handed out.
    upper_bound bigint NOT NULL CHECK (upper_bound <= 56800235584),
    -- The authority epoch: bumped by the failover runbook. Every audit row
    -- records it; an audit row with a newer epoch than the counter fences
    -- allocation like an audit end above next_id does.
    epoch       bigint NOT NULL DEFAULT 1 CHECK (epoch >= 1),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (lower_bound < upper_bound),
    CHECK (next_id BETWEEN lower_bound AND upper_bound),
    CONSTRAINT alloc_namespaces_disjoint EXCLUDE USING gist (int8range(lower_bound, upper_bound) WITH &&)
);

CREATE TABLE alloc_audit (
    -- The allocator's request id: a retry after an unknown commit outcome
    -- finds its interval here instead of taking another.
    request_id  uuid PRIMARY KEY,
    namespace   text COLLATE "C" NOT NULL REFERENCES alloc_namespaces (namespace),
    seg_start   bigint NOT NULL CHECK (seg_start >= 1),
    seg_end     bigint NOT NULL CHECK (seg_end <= 56800235584), -- exclusive
    instance    text NOT NULL CHECK (length(instance) BETWEEN 1 AND 200),
    epoch       bigint NOT NULL CHECK (epoch >= 1),
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- Set once no further create transaction can use an ID of the segment;
    -- used_count is how many of its IDs ended in a committed create (the rest
    -- of the interval is waste). sealed_by is the instance, or 'sweeper:…'
    -- for a dead instance's segment.
    sealed_at   timestamptz,
    sealed_by   text,
    used_count  bigint,
    CHECK (seg_start < seg_end),
    CHECK ((sealed_at IS NULL) = (used_count IS NULL)),
    CHECK (used_count IS NULL OR used_count BETWEEN 0 AND seg_end - seg_start),
    CONSTRAINT alloc_audit_disjoint EXCLUDE USING gist (int8range(seg_start, seg_end) WITH &&)
);
CREATE INDEX alloc_audit_namespace_end ON alloc_audit (namespace, seg_end);
CREATE INDEX alloc_audit_open ON alloc_audit (instance) WHERE sealed_at IS NULL;

-- Liveness of allocator instances: the sweeper seals the open segments of an
-- instance whose heartbeat is older than its grace period.
CREATE TABLE alloc_instances (
    instance     text PRIMARY KEY CHECK (length(instance) BETWEEN 1 AND 200),
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

---- create above / drop below ----

DROP TABLE alloc_instances;
DROP TABLE alloc_audit;
DROP TABLE alloc_namespaces;
