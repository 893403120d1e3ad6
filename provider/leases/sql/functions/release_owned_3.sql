-- Schema 3: release a lease, or withdraw a queued request, of its owner in one call (ADR 0004).

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
