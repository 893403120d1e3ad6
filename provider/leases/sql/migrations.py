"""Versioned DDL for the lease stores: the package creates and migrates its schema, never a human.

Each step moves the schema from ``version - 1`` to ``version``; ``dg_schema_version`` holds the current
version. Steps are plain SQL that SQLite and PostgreSQL both accept, applied in one transaction (both
databases have transactional DDL) while the caller holds the store's migration lock.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

# The fast-path functions. sa.text reads ":word" as a bind parameter, so no colon here is followed by a
# letter (JSON text is glued with || instead), and there is no "%".
_PG_GRANT_IF_IDLE = """
CREATE FUNCTION dg_grant_if_idle(
    p_request_id TEXT, p_owner_key TEXT, p_owner_json TEXT, p_claims TEXT, p_now DOUBLE PRECISION,
    p_expires_at DOUBLE PRECISION, p_ttl_s DOUBLE PRECISION, p_rank DOUBLE PRECISION, p_payload TEXT
) RETURNS TABLE (granted_uri TEXT, granted_fencing BIGINT)
LANGUAGE plpgsql AS $fn$
DECLARE
    locked INTEGER;
    p_uris TEXT[];
    p_config_versions BIGINT[];
    p_config_jsons TEXT[];
    p_op_jsons TEXT[];
    p_details TEXT[];
BEGIN
    -- p_claims: a JSON array of [uri, operation JSON, configuration version, configuration JSON, log
    -- detail] per table, sorted by uri (one text parameter is cheaper for the client than five arrays).
    SELECT array_agg(c->>0 ORDER BY n), array_agg((c->>2)::BIGINT ORDER BY n), array_agg(c->>3 ORDER BY n),
        array_agg(c->>1 ORDER BY n), array_agg(c->>4 ORDER BY n)
    INTO p_uris, p_config_versions, p_config_jsons, p_op_jsons, p_details
    FROM json_array_elements(p_claims::JSON) WITH ORDINALITY AS e(c, n);
    -- The same lock as every decision: the table rows, in sorted order (no deadlocks).
    SELECT count(*) INTO locked FROM (
        SELECT t.uri FROM dg_tables t WHERE t.uri = ANY(p_uris) ORDER BY t.uri FOR UPDATE
    ) AS rows_locked;
    IF locked <> cardinality(p_uris) THEN
        RETURN;  -- unknown tables: the general path creates their rows
    END IF;
    -- Idle means no lease (an expired one must be reclaimed and logged), no queued request (FIFO), no
    -- earlier answer for this request id, and a configuration known for every table.
    IF EXISTS (SELECT 1 FROM dg_leases l WHERE l.uri = ANY(p_uris))
        OR EXISTS (SELECT 1 FROM dg_queue q WHERE q.uri = ANY(p_uris))
        OR EXISTS (SELECT 1 FROM dg_requests r WHERE r.request_id = p_request_id)
        OR EXISTS (
            SELECT 1 FROM dg_tables t JOIN unnest(p_uris, p_config_jsons) AS o(uri, config_json)
                ON t.uri = o.uri
            WHERE t.config_json IS NULL AND o.config_json IS NULL
        )
    THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH offered AS (
        SELECT * FROM unnest(p_uris, p_config_versions, p_config_jsons, p_op_jsons, p_details)
            AS o(uri, config_version, config_json, op_json, detail)
    ), bumped AS (
        -- An offered configuration replaces the stored one when there is none, or when it was read at a
        -- later table version (the manager's rule).
        UPDATE dg_tables t SET
            fencing = t.fencing + 1,
            config_version = CASE WHEN o.config_json IS NOT NULL AND (t.config_json IS NULL OR
                (o.config_version IS NOT NULL AND (t.config_version IS NULL OR o.config_version > t.config_version)))
                THEN o.config_version ELSE t.config_version END,
            config_json = CASE WHEN o.config_json IS NOT NULL AND (t.config_json IS NULL OR
                (o.config_version IS NOT NULL AND (t.config_version IS NULL OR o.config_version > t.config_version)))
                THEN o.config_json ELSE t.config_json END
        FROM offered o WHERE t.uri = o.uri
        RETURNING t.uri, t.fencing, o.op_json, o.detail
    ), leases AS (
        INSERT INTO dg_leases (lease_id, uri, owner_key, owner_json, op_json, granted_at, expires_at, fencing, ttl_s)
        SELECT p_request_id, b.uri, p_owner_key, p_owner_json, b.op_json, p_now, p_expires_at, b.fencing, p_ttl_s
        FROM bumped b
    ), request AS (
        INSERT INTO dg_requests (request_id, owner_key, status, rank, enqueued_at, expires_at, payload, updated_at)
        VALUES (p_request_id, p_owner_key, 'granted', p_rank, p_now, p_expires_at, p_payload, p_now)
    ), logged AS (
        INSERT INTO dg_decisions (at, kind, request_id, uri, owner_key, detail)
        SELECT p_now, 'grant', p_request_id, b.uri, p_owner_key,
            '{"fencing":' || b.fencing::TEXT || ',' || substr(b.detail, 2)
        FROM bumped b ORDER BY b.uri
    )
    SELECT b.uri, b.fencing FROM bumped b ORDER BY b.uri;
END
$fn$
"""

_PG_RELEASE_OWNED = """
CREATE FUNCTION dg_release_owned(
    p_request_id TEXT, p_owner_key TEXT, p_tables TEXT, p_now DOUBLE PRECISION
) RETURNS TABLE (released_uri TEXT, released_fencing BIGINT)
LANGUAGE plpgsql AS $fn$
DECLARE
    p_uris TEXT[];
    p_reset_uris TEXT[];
BEGIN
    -- p_tables: a JSON array of [uri, whether releasing drops the stored configuration] per table.
    SELECT array_agg(c->>0 ORDER BY c->>0), coalesce(array_agg(c->>0) FILTER (WHERE (c->>1)::BOOLEAN), '{}')
    INTO p_uris, p_reset_uris
    FROM json_array_elements(p_tables::JSON) AS e(c);
    PERFORM 1 FROM dg_tables t WHERE t.uri = ANY(p_uris) ORDER BY t.uri FOR UPDATE;
    RETURN QUERY
    WITH gone AS (
        DELETE FROM dg_leases l
        WHERE l.lease_id = p_request_id AND l.owner_key = p_owner_key AND l.uri = ANY(p_uris)
        RETURNING l.uri, l.fencing
    ), withdrawn AS (
        -- No lease: a queued request of this owner is withdrawn instead.
        DELETE FROM dg_queue q
        WHERE q.request_id = p_request_id AND q.uri = ANY(p_uris) AND NOT EXISTS (SELECT 1 FROM gone) AND EXISTS (
            SELECT 1 FROM dg_requests r
            WHERE r.request_id = p_request_id AND r.owner_key = p_owner_key AND r.status = 'waiting'
        )
        RETURNING q.uri
    ), closed AS (
        UPDATE dg_requests r SET status = 'released', updated_at = p_now
        WHERE r.request_id = p_request_id
            AND (EXISTS (SELECT 1 FROM gone) OR EXISTS (SELECT 1 FROM withdrawn))
    ), reset AS (
        -- The lease changed the table's metadata: the next decision must bring a fresh configuration.
        UPDATE dg_tables t SET config_version = NULL, config_json = NULL
        WHERE t.uri = ANY(p_reset_uris) AND t.uri IN (SELECT g.uri FROM gone g)
    ), logged AS (
        INSERT INTO dg_decisions (at, kind, request_id, uri, owner_key, detail)
        SELECT p_now, 'release', p_request_id, x.uri, p_owner_key, x.detail FROM (
            SELECT g.uri, '{"fencing":' || g.fencing::TEXT || '}' AS detail FROM gone g
            UNION ALL SELECT w.uri, '{"withdrawn":' || 'true}' FROM withdrawn w
        ) AS x ORDER BY x.uri
    )
    SELECT g.uri, g.fencing FROM gone g
    UNION ALL SELECT w.uri, NULL::BIGINT FROM withdrawn w
    ORDER BY 1;
END
$fn$
"""

# A decision's view of its tables (ADR 0007): the table rows, their leases and queue entries, and the
# request's status row, as one JSON text in a fixed order. A declined one-call grant returns it, and a
# decision made from it commits only if the text is still the same under the locks (compared whole: no hash
# to trust). PL/pgSQL rather than SQL, so its plan is cached per session; each call reads with a fresh
# snapshot (after the caller's row locks).
_PG_TABLE_STATE = """
CREATE FUNCTION dg_table_state(p_uris TEXT[], p_request_id TEXT) RETURNS TEXT
LANGUAGE plpgsql AS $fn$
BEGIN
    RETURN (SELECT json_build_array(
        (SELECT coalesce(json_agg(json_build_array(t.uri, t.fencing, t.config_version, t.config_json)
            ORDER BY t.uri), '[]'::JSON) FROM dg_tables t WHERE t.uri = ANY(p_uris)),
        (SELECT coalesce(json_agg(json_build_array(l.lease_id, l.uri, l.owner_key, l.owner_json, l.op_json,
            l.granted_at, l.expires_at, l.fencing, l.ttl_s) ORDER BY l.uri, l.lease_id), '[]'::JSON)
            FROM dg_leases l WHERE l.uri = ANY(p_uris)),
        (SELECT coalesce(json_agg(json_build_array(q.request_id, q.uri, q.owner_key, q.owner_json, q.op_json,
            q.rank, q.expires_at) ORDER BY q.uri, q.request_id), '[]'::JSON)
            FROM dg_queue q WHERE q.uri = ANY(p_uris)),
        (SELECT json_build_array(r.request_id, r.owner_key, r.status, r.rank, r.enqueued_at, r.expires_at,
            r.payload, r.updated_at, r.last_wait) FROM dg_requests r WHERE r.request_id = p_request_id)
    )::TEXT);
END
$fn$
"""


def _edited(text: str, *edits: tuple[str, str]) -> str:
    """``text`` with each ``(old, new)`` replaced; an ``old`` that is not there is a bug, not a no-op."""
    for old, new in edits:
        if old not in text:
            raise AssertionError(f"migration text to edit not found: {old!r}")
        text = text.replace(old, new)
    return text


# Version 3's one-call grant, now answering a busy table with its state (from dg_table_state, read while
# the table rows are still locked) instead of nothing. Unknown tables still get no answer.
_PG_GRANT_IF_IDLE_4 = _edited(
    _PG_GRANT_IF_IDLE,
    (
        "RETURNS TABLE (granted_uri TEXT, granted_fencing BIGINT)",
        "RETURNS TABLE (granted_uri TEXT, granted_fencing BIGINT, state TEXT)",
    ),
    ("    locked INTEGER;\n", "    locked INTEGER;\n    v_state TEXT;\n"),
    (
        "    THEN\n        RETURN;\n    END IF;",
        "    THEN\n        v_state := dg_table_state(p_uris, p_request_id);\n"
        "        RETURN QUERY SELECT NULL::TEXT, NULL::BIGINT, v_state;\n"
        "        RETURN;\n    END IF;",
    ),
    (
        "    SELECT b.uri, b.fencing FROM bumped b ORDER BY b.uri;",
        "    SELECT b.uri, b.fencing, NULL::TEXT FROM bumped b ORDER BY b.uri;",
    ),
)

# Version 4's one-call grant, now also granting beside one live lease whose operation the requester's
# conflict model already found compatible with its own under the same configuration (ADR 0009). Each claim
# may carry a sixth element: a JSON array of such holder operation texts (absent or empty: none known).
_PG_GRANT_IF_IDLE_5 = _edited(
    _PG_GRANT_IF_IDLE_4,
    ("    p_details TEXT[];\n", "    p_details TEXT[];\n    p_compatible TEXT[];\n"),
    (
        "    -- detail] per table, sorted by uri (one text parameter is cheaper for the client than five arrays).",
        "    -- detail, compatible holder operation texts] per table, sorted by uri (one text parameter).",
    ),
    (
        "    -- Idle means no lease (an expired one must be reclaimed and logged), no queued request (FIFO), no\n",
        "    -- Grantable in one call: no lease but a compatible one, no queued request (FIFO), no\n",
    ),
    (
        "        array_agg(c->>1 ORDER BY n), array_agg(c->>4 ORDER BY n)\n"
        "    INTO p_uris, p_config_versions, p_config_jsons, p_op_jsons, p_details\n",
        "        array_agg(c->>1 ORDER BY n), array_agg(c->>4 ORDER BY n), array_agg(c->>5 ORDER BY n)\n"
        "    INTO p_uris, p_config_versions, p_config_jsons, p_op_jsons, p_details, p_compatible\n",
    ),
    (
        "    IF EXISTS (SELECT 1 FROM dg_leases l WHERE l.uri = ANY(p_uris))\n",
        """    IF EXISTS (
            -- A lease blocks this call unless it is the table's only lease, live (an expired one must be
            -- reclaimed and logged), with an operation text the requester's model found compatible with
            -- its own, and the decision would use the configuration that verdict was made under: the
            -- offered one (stored is none, the same text, or older).
            SELECT 1 FROM dg_leases l
                JOIN unnest(p_uris, p_compatible, p_config_versions, p_config_jsons)
                    AS o(uri, compatible, config_version, config_json) ON l.uri = o.uri
                JOIN dg_tables t ON t.uri = o.uri
            WHERE NOT (
                l.expires_at > p_now
                AND o.compatible IS NOT NULL AND o.config_json IS NOT NULL
                AND l.op_json IN (SELECT json_array_elements_text(o.compatible::JSON))
                AND NOT EXISTS (SELECT 1 FROM dg_leases x WHERE x.uri = l.uri AND x.lease_id <> l.lease_id)
                AND (t.config_json IS NULL OR t.config_json = o.config_json OR (o.config_version IS NOT NULL
                    AND (t.config_version IS NULL OR o.config_version > t.config_version)))
            )
        )
""",
    ),
)

# An owner's short name as ``Owner.describe`` gives it, from its stored JSON text: the one-call queue entry
# writes it into the wait's log detail (tests compare the two on generated owners).
_PG_OWNER_NAME = """
CREATE FUNCTION dg_owner_name(p_owner_json TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT CASE WHEN coalesce(o->>'name', '') <> '' THEN o->>'name'
        ELSE concat_ws('.', nullif(o->>'dag_id', ''), nullif(o->>'task_id', ''))
            || CASE WHEN (o->>'map_index')::BIGINT >= 0 THEN '[' || ((o->>'map_index')::BIGINT)::TEXT || ']'
                ELSE '' END
    END FROM (SELECT p_owner_json::JSON AS o) AS owner_row
$fn$
"""

# Version 5's one-call call, now also queueing a one-table request behind the table's only lease, when that
# lease is live, nothing is queued, and the requester brings its model's wait answer behind that very
# operation under the configuration the decision would use (ADR 0010). Each claim may carry a seventh
# element: a JSON object from holder operation text to the six text pieces of that answer (absent or null:
# none known). The answer names the holder: (uri, NULL, JSON [lease id, owner JSON text, operation text]).
_PG_GRANT_IF_IDLE_6 = _edited(
    _PG_GRANT_IF_IDLE_5,
    (
        "    p_expires_at DOUBLE PRECISION, p_ttl_s DOUBLE PRECISION, p_rank DOUBLE PRECISION, p_payload TEXT\n)",
        "    p_expires_at DOUBLE PRECISION, p_ttl_s DOUBLE PRECISION, p_rank DOUBLE PRECISION, p_payload TEXT,\n"
        "    p_wait_expires_at DOUBLE PRECISION\n)",
    ),
    (
        "    p_compatible TEXT[];\n",
        "    p_compatible TEXT[];\n    p_waits TEXT[];\n    v_lease_id TEXT;\n    v_owner_json TEXT;\n"
        "    v_op_json TEXT;\n    v_pieces JSON;\n    v_name TEXT;\n",
    ),
    (
        "    -- detail, compatible holder operation texts] per table, sorted by uri (one text parameter).",
        "    -- detail, compatible holder operation texts, wait answers by holder operation text] per table,\n"
        "    -- sorted by uri (one text parameter).",
    ),
    (
        "array_agg(c->>5 ORDER BY n)\n"
        "    INTO p_uris, p_config_versions, p_config_jsons, p_op_jsons, p_details, p_compatible\n",
        "array_agg(c->>5 ORDER BY n),\n        array_agg(c->>6 ORDER BY n)\n"
        "    INTO p_uris, p_config_versions, p_config_jsons, p_op_jsons, p_details, p_compatible, p_waits\n",
    ),
    (
        "    THEN\n        v_state := dg_table_state(p_uris, p_request_id);\n",
        """    THEN
        IF cardinality(p_uris) = 1 AND p_waits[1] IS NOT NULL AND p_wait_expires_at IS NOT NULL THEN
            -- Queued in one call: the table's only lease is live (an expired one must be reclaimed and
            -- logged), nothing is queued (so the position is the answer's), the request id is new, and the
            -- decision would use the configuration the requester's model judged the pair under.
            SELECT l.lease_id, l.owner_json, l.op_json, p_waits[1]::JSON -> l.op_json
            INTO v_lease_id, v_owner_json, v_op_json, v_pieces
            FROM dg_leases l JOIN dg_tables t ON t.uri = l.uri
            WHERE l.uri = p_uris[1] AND l.expires_at > p_now
                AND p_waits[1]::JSON -> l.op_json IS NOT NULL
                -- PostgreSQL cannot read a NUL escaped in JSON as text: such an owner takes the general path.
                AND position('\\u0000' IN l.owner_json) = 0
                AND p_config_jsons[1] IS NOT NULL
                AND (t.config_json IS NULL OR t.config_json = p_config_jsons[1] OR (p_config_versions[1] IS NOT NULL
                    AND (t.config_version IS NULL OR p_config_versions[1] > t.config_version)))
                AND NOT EXISTS (SELECT 1 FROM dg_leases x WHERE x.uri = l.uri AND x.lease_id <> l.lease_id)
                AND NOT EXISTS (SELECT 1 FROM dg_queue q WHERE q.uri = l.uri)
                AND NOT EXISTS (SELECT 1 FROM dg_requests r WHERE r.request_id = p_request_id);
            IF FOUND THEN
                -- A newer offered configuration replaces the stored one, as in the general decision; the
                -- fencing token moves only on grants.
                UPDATE dg_tables t SET config_version = p_config_versions[1], config_json = p_config_jsons[1]
                WHERE t.uri = p_uris[1] AND (t.config_json IS NULL OR (p_config_versions[1] IS NOT NULL
                        AND (t.config_version IS NULL OR p_config_versions[1] > t.config_version)));
                INSERT INTO dg_queue (request_id, uri, owner_key, owner_json, op_json, rank, expires_at)
                VALUES (p_request_id, p_uris[1], p_owner_key, p_owner_json, p_op_jsons[1], p_rank, p_wait_expires_at);
                INSERT INTO dg_requests (request_id, owner_key, status, rank, enqueued_at, expires_at, payload,
                    updated_at, last_wait)
                VALUES (p_request_id, p_owner_key, 'waiting', p_rank, p_now, p_wait_expires_at, p_payload, p_now,
                    (v_pieces->>0) || to_json(v_lease_id)::TEXT || ',' || v_owner_json || (v_pieces->>1));
                v_name := to_json(dg_owner_name(v_owner_json))::TEXT;
                INSERT INTO dg_decisions (at, kind, request_id, uri, owner_key, detail)
                VALUES (p_now, 'wait', p_request_id, p_uris[1], p_owner_key,
                    (v_pieces->>2) || to_json(v_lease_id)::TEXT || (v_pieces->>3) || v_name || (v_pieces->>4)
                    || substr(v_name, 2, length(v_name) - 2) || (v_pieces->>5));
                RETURN QUERY SELECT p_uris[1], NULL::BIGINT, json_build_array(v_lease_id, v_owner_json, v_op_json)::TEXT;
                RETURN;
            END IF;
        END IF;
        v_state := dg_table_state(p_uris, p_request_id);
""",
    ),
)

_PG_CHECK_STATE = """
CREATE FUNCTION dg_check_state(p_uris TEXT[], p_request_id TEXT, p_state TEXT) RETURNS VOID
LANGUAGE plpgsql AS $fn$
BEGIN
    -- The same lock as every decision; then the rows must be exactly those the decision was made from.
    PERFORM 1 FROM dg_tables t WHERE t.uri = ANY(p_uris) ORDER BY t.uri FOR UPDATE;
    IF dg_table_state(p_uris, p_request_id) IS DISTINCT FROM p_state THEN
        RAISE EXCEPTION 'deltaguard: the tables changed since the decision read them'
            USING ERRCODE = 'serialization_failure';
    END IF;
END
$fn$
"""

#: The largest ``autovacuum_analyze_threshold`` PostgreSQL accepts: automatic ANALYZE never starts.
_NEVER = 2_147_483_647
#: An insert-triggered VACUUM once the table has taken as many new rows as it holds (the default is a fifth).
_INSERTS_DOUBLE = "autovacuum_vacuum_insert_scale_factor = 1.0"

#: (version, statements). Never edit a released step: append a new one.
#: A statement is SQL for every dialect, or ``(dialect, sql)`` for one dialect only.
MIGRATIONS: Sequence[tuple[int, Sequence[str | tuple[str, str]]]] = (
    (
        1,
        (
            "CREATE TABLE dg_schema_version (version INTEGER NOT NULL)",
            # One row per table: the lock taken by every decision on the table, and its fencing counter.
            "CREATE TABLE dg_tables (uri TEXT PRIMARY KEY, fencing BIGINT NOT NULL DEFAULT 0, "
            "config_version BIGINT, config_json TEXT)",
            "CREATE TABLE dg_leases (lease_id TEXT NOT NULL, uri TEXT NOT NULL, owner_key TEXT NOT NULL, "
            "owner_json TEXT NOT NULL, op_json TEXT NOT NULL, granted_at DOUBLE PRECISION NOT NULL, "
            "expires_at DOUBLE PRECISION NOT NULL, fencing BIGINT NOT NULL, ttl_s DOUBLE PRECISION NOT NULL, "
            "PRIMARY KEY (lease_id, uri))",
            "CREATE INDEX dg_leases_uri ON dg_leases (uri)",
            "CREATE TABLE dg_queue (request_id TEXT NOT NULL, uri TEXT NOT NULL, owner_key TEXT NOT NULL, "
            "owner_json TEXT NOT NULL, op_json TEXT NOT NULL, rank DOUBLE PRECISION NOT NULL, "
            "expires_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (request_id, uri))",
            "CREATE INDEX dg_queue_uri ON dg_queue (uri, rank)",
            "CREATE TABLE dg_requests (request_id TEXT PRIMARY KEY, owner_key TEXT NOT NULL, "
            "status TEXT NOT NULL, rank DOUBLE PRECISION NOT NULL, enqueued_at DOUBLE PRECISION NOT NULL, "
            "expires_at DOUBLE PRECISION NOT NULL, payload TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL)",
            "CREATE TABLE dg_decisions (at DOUBLE PRECISION NOT NULL, kind TEXT NOT NULL, "
            "request_id TEXT NOT NULL, uri TEXT NOT NULL, owner_key TEXT NOT NULL, detail TEXT NOT NULL)",
            "CREATE INDEX dg_decisions_uri ON dg_decisions (uri, at)",
            "CREATE INDEX dg_decisions_at ON dg_decisions (at)",
            "INSERT INTO dg_schema_version (version) VALUES (0)",
        ),
    ),
    (
        2,
        (
            # The last wait answer: a polling waiter whose blockers are all still there gets it back without a
            # locking transaction, and a wait is logged only when its blockers change.
            "ALTER TABLE dg_requests ADD COLUMN last_wait TEXT",
            # Decisions for one owner (task logs) and pruning of closed requests, without full scans.
            "CREATE INDEX dg_decisions_owner ON dg_decisions (owner_key, at)",
            "CREATE INDEX dg_requests_closed ON dg_requests (status, updated_at)",
            # Insertion order breaks ties between log entries with equal timestamps (SQLite has rowid).
            ("postgresql", "ALTER TABLE dg_decisions ADD COLUMN seq BIGSERIAL"),
        ),
    ),
    (
        3,
        (
            # One-statement fast paths for the PostgreSQL store (see ADR 0004): a grant on tables with no
            # lease, queue or request row, and a release by the owner. Each runs as one call in autocommit;
            # PL/pgSQL gives every statement a fresh snapshot, so the checks after the row locks see what
            # transactions that held the locks before committed (one plain statement could not).
            ("postgresql", _PG_GRANT_IF_IDLE),
            ("postgresql", _PG_RELEASE_OWNED),
        ),
    ),
    (
        4,
        (
            # Optimistic decisions on busy tables (ADR 0007): the one-call grant returns the tables' state
            # when it cannot grant, and a decision made from that state commits after one check.
            ("postgresql", _PG_TABLE_STATE),
            ("postgresql", "DROP FUNCTION dg_grant_if_idle"),
            ("postgresql", _PG_GRANT_IF_IDLE_4),
            ("postgresql", _PG_CHECK_STATE),
        ),
    ),
    (
        5,
        (
            # A grant beside a holder the requester already knows to be compatible, in one call (ADR 0009).
            ("postgresql", "DROP FUNCTION dg_grant_if_idle"),
            ("postgresql", _PG_GRANT_IF_IDLE_5),
        ),
    ),
    (
        6,
        (
            # A queue entry behind a holder the requester already knows to conflict, in one call (ADR 0010).
            ("postgresql", _PG_OWNER_NAME),
            ("postgresql", "DROP FUNCTION dg_grant_if_idle"),
            ("postgresql", _PG_GRANT_IF_IDLE_6),
        ),
    ),
    (
        7,
        (
            # Less work for autovacuum (ADR 0011): every VACUUM or ANALYZE of a table makes every session
            # re-plan the statements that read it, all at once.
            #
            # Closing a request changes its status and update time. With no index on either, PostgreSQL
            # rewrites the row in place (a HOT update, given room on the page), so closed requests leave no
            # dead index entries for VACUUM to scan the indexes for. Pruning finds old requests by enqueue
            # time, which closing does not change.
            "DROP INDEX dg_requests_closed",
            "CREATE INDEX dg_requests_enqueued ON dg_requests (enqueued_at)",
            # The store's plans are generic index lookups that no column statistic changes, so automatic
            # ANALYZE only costs (a manual ANALYZE still works). The small churning tables are still vacuumed,
            # without truncating their tail (that needs an ACCESS EXCLUSIVE lock, which stalls every
            # decision). The two growing tables are vacuumed for their inserts once they have doubled rather
            # than after every fifth more rows. dg_requests keeps 30 % of each page free for the in-place
            # updates above.
            *(
                ("postgresql", f"ALTER TABLE {table} SET ({options})")
                for table, options in (
                    ("dg_tables", f"autovacuum_analyze_threshold = {_NEVER}"),
                    ("dg_leases", f"autovacuum_analyze_threshold = {_NEVER}, vacuum_truncate = false"),
                    ("dg_queue", f"autovacuum_analyze_threshold = {_NEVER}, vacuum_truncate = false"),
                    (
                        "dg_requests",
                        f"autovacuum_analyze_threshold = {_NEVER}, {_INSERTS_DOUBLE}, fillfactor = 70",
                    ),
                    ("dg_decisions", f"autovacuum_analyze_threshold = {_NEVER}, {_INSERTS_DOUBLE}"),
                )
            ),
        ),
    ),
)

LATEST = MIGRATIONS[-1][0]


class SchemaTooNewError(RuntimeError):
    """The database was migrated by a newer deltaguard; refusing to guess its meaning."""


def current_version(conn: sa.Connection) -> int:
    """The schema version (0 for an empty database)."""
    if not sa.inspect(conn).has_table("dg_schema_version"):
        return 0
    value = conn.execute(sa.text("SELECT MAX(version) FROM dg_schema_version")).scalar()
    return int(value or 0)


def migrate(conn: sa.Connection, target: int = LATEST) -> int:
    """Apply the missing steps up to ``target`` inside the caller's transaction; return the new version.

    :param conn: a connection inside a transaction that holds the store's migration lock.
    :param target: the version to reach (tests use older targets to build old schemas).
    :raises SchemaTooNewError: when the database is newer than this package knows.
    """
    version = current_version(conn)
    if version > LATEST:
        raise SchemaTooNewError(
            f"lease store schema version {version} is newer than this deltaguard ({LATEST})"
        )
    for step, statements in MIGRATIONS:
        if version < step <= target:
            for statement in statements:
                if isinstance(statement, tuple):
                    dialect, statement = statement
                    if conn.dialect.name != dialect:
                        continue
                conn.execute(sa.text(statement))
            conn.execute(sa.text("UPDATE dg_schema_version SET version = :v"), {"v": step})
            version = step
    return version
