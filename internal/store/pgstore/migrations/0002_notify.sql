-- delayq schema version 2: the servers notify each other after their
-- own commits, coalesced, so the jobs table loses its NOTIFY triggers:
-- Postgres serializes every committing transaction that has sent a
-- NOTIFY (a database-wide lock held through the commit's WAL flush), so
-- a NOTIFY per write capped the writes of every instance at one WAL
-- flush each. Puts made through the SQL functions still notify at
-- commit, but only when a server must act.

DROP TRIGGER jobs_notify_insert ON delayq.jobs;
DROP TRIGGER jobs_notify_update ON delayq.jobs;
DROP FUNCTION delayq.notify_jobs();

-- The time the instance holding the timer lease has promised to look at
-- the jobs table again, at the latest. A put due at or after it needs no
-- NOTIFY. Unlogged: lost on a crash or a failover, when an empty table
-- makes every put notify until the timer publishes again.
CREATE UNLOGGED TABLE delayq.timer (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    next timestamptz NOT NULL
);

-- timer_publish is called by the instance holding the timer lease
-- after a tick: it raises the promised time to the earliest due time or
-- deadline in the table, or to p_floor when that comes later (the timer
-- then wakes at p_floor at the latest: it keeps a promise it cannot
-- raise by not sleeping past it, and publishing a little ahead spares it
-- a publish per tick while jobs fall due every millisecond), and returns
-- the promise now in force. A put that read the old promise holds a
-- shared advisory lock until it commits; the publish takes the lock
-- exclusively without waiting and, when it cannot, leaves the promise as
-- it is. Each statement of this VOLATILE function reads a fresh
-- snapshot, so the earliest time is read after every put that read the
-- old promise has committed.
CREATE FUNCTION delayq.timer_publish(p_floor timestamptz) RETURNS timestamptz LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    m timestamptz;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    IF NOT pg_try_advisory_xact_lock(hashtext('delayq_channel'), 1) THEN
        RETURN (SELECT t.next FROM delayq.timer t);
    END IF;
    SELECT least(
        (SELECT j.due FROM delayq.jobs j WHERE j.state = 'delayed' ORDER BY j.due, j.seq LIMIT 1),
        (SELECT j.deadline FROM delayq.jobs j WHERE j.state = 'reserved' ORDER BY j.deadline, j.seq LIMIT 1)) INTO m;
    m := greatest(coalesce(m, 'infinity'), p_floor);
    INSERT INTO delayq.timer AS t (one, next) VALUES (true, m)
        ON CONFLICT (one) DO UPDATE SET next = EXCLUDED.next;
    RETURN m;
END $$;

CREATE OR REPLACE FUNCTION delayq.put(
    topic        text,
    body         bytea,
    delay        interval DEFAULT '0',
    id           text DEFAULT NULL,
    priority     bigint DEFAULT 1024,
    ttr          interval DEFAULT '60 seconds',
    max_attempts integer DEFAULT 0,
    at           timestamptz DEFAULT NULL
) RETURNS TABLE (job_id text, job_seq bigint) LANGUAGE plpgsql AS $$
DECLARE
    v_now   timestamptz := date_trunc('milliseconds', clock_timestamp());
    v_id    text := coalesce(put.id, delayq.uuid_v7());
    v_delay bigint;
    v_ttr   bigint;
    v_due   timestamptz;
    v_seq   bigint;
    v_state text;
    v_max   integer;
    v_next  timestamptz;
    taken   record;
BEGIN
    IF put.topic IS NULL OR length(put.topic) = 0 OR octet_length(put.topic) > 200
       OR put.topic !~ '^[A-Za-z0-9+/;.$_()][A-Za-z0-9+/;.$_()-]*$' THEN
        PERFORM delayq.raise_invalid('topic', format('%L is not a valid topic name (1-200 bytes of letters, digits and -+/;.$_(), not starting with -)', left(put.topic, 64)));
    END IF;
    IF length(v_id) = 0 OR octet_length(v_id) > 200 OR v_id !~ '^[A-Za-z0-9_.:-]+$' THEN
        PERFORM delayq.raise_invalid('id', format('%L is not a valid job id (1-200 bytes of [A-Za-z0-9_.:-])', left(v_id, 64)));
    END IF;
    SELECT value::integer INTO v_max FROM delayq.settings WHERE name = 'max_body';
    IF put.body IS NULL THEN
        PERFORM delayq.raise_invalid('body', 'is null');
    END IF;
    IF octet_length(put.body) > coalesce(v_max, 65535) THEN
        PERFORM delayq.raise_invalid('body', format('%s bytes, more than the %s allowed', octet_length(put.body), coalesce(v_max, 65535)));
    END IF;
    v_delay := floor(extract(epoch FROM coalesce(put.delay, '0')) * 1000)::bigint;
    IF v_delay < 0 THEN
        PERFORM delayq.raise_invalid('delay', 'is negative');
    END IF;
    v_ttr := floor(extract(epoch FROM coalesce(put.ttr, '60 seconds')) * 1000)::bigint;
    IF v_ttr < 1000 THEN
        PERFORM delayq.raise_invalid('ttr', 'is less than 1s');
    END IF;
    IF put.priority IS NULL OR put.priority < 0 OR put.priority > 4294967295 THEN
        PERFORM delayq.raise_invalid('priority', 'is not in 0..4294967295');
    END IF;
    IF put.max_attempts IS NULL OR put.max_attempts < 0 THEN
        PERFORM delayq.raise_invalid('max_attempts', 'is negative');
    END IF;
    IF put.at IS NOT NULL THEN
        v_delay := greatest(0, ceil(extract(epoch FROM put.at - clock_timestamp()) * 1000))::bigint;
    END IF;
    IF v_delay > 0 THEN
        v_due := to_timestamp(ceil(extract(epoch FROM clock_timestamp() + v_delay * interval '1 millisecond') * 1000) / 1000.0);
        v_state := 'delayed';
    ELSE
        v_due := v_now;
        v_state := 'ready';
    END IF;
    v_seq := nextval('delayq.job_seq');
    INSERT INTO delayq.jobs AS j (seq, id, topic, state, priority, due, created, delay_ms, ttr_ms, max_attempts, body)
    VALUES (v_seq, v_id, put.topic, v_state, put.priority, v_due, v_now, v_delay, v_ttr, put.max_attempts, put.body)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        -- A retained job whose retention ran out no longer holds its id
        -- (looked for only on a conflict: most puts have none).
        DELETE FROM delayq.jobs j WHERE j.id = v_id AND j.expires <= v_now;
        IF FOUND THEN
            INSERT INTO delayq.jobs AS j (seq, id, topic, state, priority, due, created, delay_ms, ttr_ms, max_attempts, body)
            VALUES (v_seq, v_id, put.topic, v_state, put.priority, v_due, v_now, v_delay, v_ttr, put.max_attempts, put.body)
            ON CONFLICT DO NOTHING;
        END IF;
    END IF;
    IF NOT FOUND THEN
        SELECT j.state INTO taken FROM delayq.jobs j WHERE j.id = v_id;
        PERFORM delayq.raise_exists(v_id, coalesce(taken.state, 'unknown'));
    END IF;
    -- Wake the servers at commit, only when one must act: consumers for
    -- a ready job; the timer only for a job due before the time it has
    -- promised to look again (the timer row; see timer_publish).
    IF v_state = 'ready' THEN
        PERFORM pg_notify('delayq_channel', 'r 1 ' || put.topic);
    ELSE
        PERFORM pg_advisory_xact_lock_shared(hashtext('delayq_channel'), 1);
        SELECT t.next INTO v_next FROM delayq.timer t;
        IF v_next IS NULL OR v_next < clock_timestamp() OR v_due < v_next THEN
            PERFORM pg_notify('delayq_channel', 'd ' || (extract(epoch FROM v_due) * 1000)::bigint);
        END IF;
    END IF;
    job_id := v_id;
    job_seq := v_seq;
    RETURN NEXT;
END $$;

