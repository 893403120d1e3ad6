-- An owner's short name as ``Owner.describe`` gives it, from its stored JSON text: the one-call queue entry
-- writes it into the wait's log detail (tests compare the two on generated owners).

CREATE FUNCTION dg_owner_name(p_owner_json TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT CASE WHEN coalesce(o->>'name', '') <> '' THEN o->>'name'
        ELSE concat_ws('.', nullif(o->>'dag_id', ''), nullif(o->>'task_id', ''))
            || CASE WHEN (o->>'map_index')::BIGINT >= 0 THEN '[' || ((o->>'map_index')::BIGINT)::TEXT || ']'
                ELSE '' END
    END FROM (SELECT p_owner_json::JSON AS o) AS owner_row
$fn$
