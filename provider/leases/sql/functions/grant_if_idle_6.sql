-- Version 5's one-call call, now also queueing a one-table request behind the table's only lease, when that
-- lease is live, nothing is queued, and the requester brings its model's wait answer behind that very
-- operation under the configuration the decision would use (ADR 0010). Each claim may carry a seventh
-- element: a JSON object from holder operation text to the six text pieces of that answer (absent or null:
-- none known). The answer names the holder: (uri, NULL, JSON [lease id, owner JSON text, operation text]).

CREATE FUNCTION dg_grant_if_idle(
    p_request_id TEXT, p_owner_key TEXT, p_owner_json TEXT, p_claims TEXT, p_now DOUBLE PRECISION,
    p_expires_at DOUBLE PRECISION, p_ttl_s DOUBLE PRECISION, p_rank DOUBLE PRECISION, p_payload TEXT,
    p_wait_expires_at DOUBLE PRECISION
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
    p_compatible TEXT[];
    p_waits TEXT[];
    v_lease_id TEXT;
    v_owner_json TEXT;
    v_op_json TEXT;
    v_pieces JSON;
    v_name TEXT;
BEGIN
    -- p_claims: a JSON array of [uri, operation JSON, configuration version, configuration JSON, log
    -- detail, compatible holder operation texts, wait answers by holder operation text] per table,
    -- sorted by uri (one text parameter).
    SELECT array_agg(c->>0 ORDER BY n), array_agg((c->>2)::BIGINT ORDER BY n), array_agg(c->>3 ORDER BY n),
        array_agg(c->>1 ORDER BY n), array_agg(c->>4 ORDER BY n), array_agg(c->>5 ORDER BY n),
        array_agg(c->>6 ORDER BY n)
    INTO p_uris, p_config_versions, p_config_jsons, p_op_jsons, p_details, p_compatible, p_waits
    FROM json_array_elements(p_claims::JSON) WITH ORDINALITY AS e(c, n);
    -- The same lock as every decision: the table rows, in sorted order (no deadlocks).
    SELECT count(*) INTO locked FROM (
        SELECT t.uri FROM dg_tables t WHERE t.uri = ANY(p_uris) ORDER BY t.uri FOR UPDATE
    ) AS rows_locked;
    IF locked <> cardinality(p_uris) THEN
        RETURN;  -- unknown tables: the general path creates their rows
    END IF;
    -- Grantable in one call: no lease but a compatible one, no queued request (FIFO), no
    -- earlier answer for this request id, and a configuration known for every table.
    IF EXISTS (
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
        OR EXISTS (SELECT 1 FROM dg_queue q WHERE q.uri = ANY(p_uris))
        OR EXISTS (SELECT 1 FROM dg_requests r WHERE r.request_id = p_request_id)
        OR EXISTS (
            SELECT 1 FROM dg_tables t JOIN unnest(p_uris, p_config_jsons) AS o(uri, config_json)
                ON t.uri = o.uri
            WHERE t.config_json IS NULL AND o.config_json IS NULL
        )
    THEN
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
                AND position('\u0000' IN l.owner_json) = 0
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
