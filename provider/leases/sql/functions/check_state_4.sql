-- Schema 4: a decision made from a snapshot of its tables (ADR 0007) commits only if dg_table_state is
-- still the same text under the row locks; otherwise it raises and the caller decides again under the locks.

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
