"""A named limit's common case in one round trip (Postgres): durable_limit_take(...) takes the limit's gate row, reads
what it holds by the database's clock and, when nobody waits in line and there is room, takes it (a slot, a start in
the window), all in one statement that is its own transaction: the gate row is held for that statement only, where a
take in Python's own transaction held it across four round trips (docs/benchmarks.md, "a rate limit across
workers"). Each statement of a PL/pgSQL function reads a snapshot of its own, taken after the one before it: the
counts are read once the gate is held, so they see every take committed before it. Anything else (runs waiting, the
call's own ticket) is left to durable/runtime/limits.py's path, which the function says by taking nothing. The same
function re-takes the start of a call that would leave later than the rate's margin after it (`p_replace`).
SQLite: nothing (one writer at a time already).
"""
from django.db import migrations

TAKE = """
CREATE OR REPLACE FUNCTION durable_limit_take(
    p_limit text, p_key text, p_run uuid, p_call text, p_token bigint, p_priority integer,
    p_concurrency integer, p_rate integer, p_rate_seconds double precision, p_tokens bigint,
    p_tokens_seconds double precision, p_window_seconds double precision, p_grace_seconds double precision,
    p_terminal text[], p_replace bigint,
    OUT taken boolean, OUT in_line boolean, OUT slot bigint, OUT use_id bigint, OUT at timestamptz,
    OUT held integer, OUT granted integer, OUT paused_until timestamptz, OUT starts timestamptz[],
    OUT used bigint[], OUT started timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_gate bigint;
    v_mine integer;
    v_queued integer;
    v_started integer := 0;
    v_tokens bigint := 0;
    v_room double precision := 'Infinity';
BEGIN
    taken := false;
    SELECT g.id, g.paused_until INTO v_gate, paused_until FROM durable_limitgate g
        WHERE g."limit" = p_limit AND g.key = p_key FOR UPDATE;
    IF NOT FOUND THEN  -- a new key: its row, then the lock on it
        INSERT INTO durable_limitgate ("limit", key) VALUES (p_limit, p_key) ON CONFLICT DO NOTHING;
        SELECT g.id, g.paused_until INTO v_gate, paused_until FROM durable_limitgate g
            WHERE g."limit" = p_limit AND g.key = p_key FOR UPDATE;
    END IF;
    at := clock_timestamp();  -- once the gate is held
    IF p_replace IS NOT NULL THEN  -- a call re-taking its start (it would have left too late after it): the old one
        DELETE FROM durable_limituse u WHERE u.id = p_replace;  -- goes (0: already gone), the call keeps its place
    END IF;
    IF p_key <> '' THEN  -- the limit's pause is kept on its row for key ""
        SELECT g.paused_until INTO paused_until FROM durable_limitgate g WHERE g."limit" = p_limit AND g.key = '';
    END IF;
    SELECT count(*) FILTER (WHERE t.state = 'HELD' AND r.status = 'RUNNING' AND r.fencing_token = t.token),
           count(*) FILTER (WHERE t.state = 'GRANTED' AND t.granted_at > at - make_interval(secs => p_grace_seconds)
                            AND NOT r.status = ANY(p_terminal)),
           count(*) FILTER (WHERE t.state = 'WAITING' OR (t.state = 'GRANTED' AND NOT (
                            t.granted_at > at - make_interval(secs => p_grace_seconds)
                            AND NOT r.status = ANY(p_terminal)))),
           count(*) FILTER (WHERE t.run_id = p_run AND t.call = p_call)
        INTO held, granted, v_queued, v_mine
        FROM durable_limitticket t JOIN durable_run r ON r.id = t.run_id
        WHERE t."limit" = p_limit AND t.key = p_key;
    IF p_rate IS NOT NULL OR p_tokens IS NOT NULL THEN
        SELECT coalesce(array_agg(u.started_at ORDER BY u.started_at, u.id), '{}'),
               coalesce(array_agg(u.tokens ORDER BY u.started_at, u.id), '{}'),
               count(*) FILTER (WHERE u.started_at > at - make_interval(secs => coalesce(p_rate_seconds, 0))),
               coalesce(sum(u.tokens) FILTER (WHERE u.started_at > at - make_interval(
                   secs => coalesce(p_tokens_seconds, 0))), 0)
            INTO starts, used, v_started, v_tokens
            FROM durable_limituse u
            WHERE u."limit" = p_limit AND u.key = p_key AND u.started_at > at - make_interval(secs => p_window_seconds);
    ELSE
        starts := '{}';
        used := '{}';
    END IF;
    in_line := p_replace IS NULL AND (v_queued > 0 OR v_mine > 0);
    IF in_line THEN
        RETURN;  -- runs wait (served first), or the call has a ticket: the runtime's path
    END IF;
    IF paused_until IS NOT NULL AND paused_until > at THEN
        v_room := 0;
    END IF;
    IF p_concurrency IS NOT NULL THEN
        v_room := least(v_room, p_concurrency - held - granted);
    END IF;
    IF p_rate IS NOT NULL THEN
        v_room := least(v_room, p_rate - v_started - granted);
    END IF;
    IF p_tokens IS NOT NULL AND v_tokens >= p_tokens THEN
        v_room := 0;
    END IF;
    IF v_room < 1 THEN
        RETURN;
    END IF;
    taken := true;
    IF p_concurrency IS NOT NULL THEN
        INSERT INTO durable_limitticket ("limit", key, run_id, call, state, token, priority, arrived_at)
            VALUES (p_limit, p_key, p_run, p_call, 'HELD', p_token, p_priority, at) RETURNING id INTO slot;
    END IF;
    IF p_rate IS NOT NULL OR p_tokens IS NOT NULL THEN
        -- its start as late as the gate allows, by the clock, right before the call goes out
        INSERT INTO durable_limituse ("limit", key, started_at, tokens)
            VALUES (p_limit, p_key, clock_timestamp(), 0) RETURNING id, started_at INTO use_id, started;
        IF mod(use_id, 32) = 0 THEN  -- now and then, the starts the window no longer needs
            DELETE FROM durable_limituse u WHERE u."limit" = p_limit AND u.key = p_key
                AND u.started_at <= at - make_interval(secs => p_window_seconds);
        END IF;
    END IF;
END
$$
"""

DROP = ("DROP FUNCTION IF EXISTS durable_limit_take(text, text, uuid, text, bigint, integer, integer, integer, "
        "double precision, bigint, double precision, double precision, double precision, text[], bigint)")


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TAKE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("durable", "0033_stored_values")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
