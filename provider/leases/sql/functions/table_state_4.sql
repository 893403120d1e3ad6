-- A decision's view of its tables (ADR 0007): the table rows, their leases and queue entries, and the
-- request's status row, as one JSON text in a fixed order. A declined one-call grant returns it, and a
-- decision made from it commits only if the text is still the same under the locks (compared whole: no hash
-- to trust). PL/pgSQL rather than SQL, so its plan is cached per session; each call reads with a fresh
-- snapshot (after the caller's row locks).

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
