-- After a lease or queue row is deleted (a release, an expired lease reclaimed, a waiter granted or gone):
-- tell the listening triggerers which holder left which table, but only while some request still waits on
-- that table, so a release nobody waits for pays one index probe and no NOTIFY (ADR 0025). The payload is
-- "<id> <table uri>", the id taken from the column the
-- trigger names (lease_id or request_id; ids hold no space). NOTIFY is sent on commit, never for a rollback.

CREATE FUNCTION dg_notify_freed() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF EXISTS (SELECT 1 FROM dg_queue WHERE uri = OLD.uri) THEN
        PERFORM pg_notify('deltaguard_freed', (to_jsonb(OLD) ->> TG_ARGV[0]) || ' ' || OLD.uri);
    END IF;
    RETURN NULL;
END
$fn$
