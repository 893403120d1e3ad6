-- Version 3's one-call grant, now answering a busy table with its state (from dg_table_state, read while
-- the table rows are still locked) instead of nothing. Unknown tables still get no answer.

CREATE FUNCTION dg_grant_if_idle(
    p_request_id TEXT, p_owner_key TEXT, p_owner_json TEXT, p_claims TEXT, p_now DOUBLE PRECISION,
    p_expires_at DOUBLE PRECISION, p_ttl_s DOUBLE PRECISION, p_rank DOUBLE PRECISION, p_payload TEXT
) RETURNS TABLE (granted_uri TEXT, granted_fencing BIGINT, state TEXT)
LANGUAGE plpgsql AS $fn$
DECLARE
    locked INTEGER;
    v_state TEXT;
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
        v_state := dg_table_state(p_uris, p_request_id);
        RETURN QUERY SELECT NULL::TEXT, NULL::BIGINT, v_state;
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
    SELECT b.uri, b.fencing, NULL::TEXT FROM bumped b ORDER BY b.uri;
END
$fn$
