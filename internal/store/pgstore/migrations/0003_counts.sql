-- delayq schema version 3: each topic's live job counts kept as the
-- jobs change, so the topic statistics the servers read every second
-- (history, alarms, beanstalkd stats) cost the number of topics, not a
-- scan of every live job.
--
-- counts holds deltas: each writing transaction adds its own to the row
-- (topic, slot) of its session, slot = pg_backend_pid(). A session runs
-- one transaction at a time, so no two transactions update one row at
-- once: no lock waits, no deadlocks between writers. A topic's counts
-- are the sums over its rows. The instance holding the timer lease folds
-- the session rows into slot 0 now and then, and drops rows left at
-- zero. Every delayq writer of the jobs table must add its deltas: stop
-- servers older than schema version 3 before this migration runs.

CREATE TABLE delayq.counts (
    topic    text NOT NULL,
    slot     integer NOT NULL,
    ready    bigint NOT NULL DEFAULT 0,
    delayed  bigint NOT NULL DEFAULT 0,
    reserved bigint NOT NULL DEFAULT 0,
    buried   bigint NOT NULL DEFAULT 0,
    urgent   bigint NOT NULL DEFAULT 0,  -- ready with priority < 1024
    PRIMARY KEY (topic, slot)
) WITH (fillfactor = 70);

-- The counts start from the live jobs, read while no put or transition
-- may commit (SHARE blocks writes, not reads).
LOCK TABLE delayq.jobs IN SHARE MODE;
INSERT INTO delayq.counts (topic, slot, ready, delayed, reserved, buried, urgent)
SELECT topic, 0, count(*) FILTER (WHERE state = 'ready'), count(*) FILTER (WHERE state = 'delayed'),
       count(*) FILTER (WHERE state = 'reserved'), count(*) FILTER (WHERE state = 'buried'),
       count(*) FILTER (WHERE state = 'ready' AND priority < 1024)
FROM delayq.jobs WHERE ended IS NULL GROUP BY topic;

-- A topic's oldest ready job (OldestReady), one index probe per topic.
-- The topic is indexed under the "C" collation, which only the probe
-- names (topic COLLATE "C" = ...): reserve's "topic = ..." cannot use
-- this index, so the planner never takes it for reserve (by (topic, due)
-- then a sort of every ready job of the topic, spilled to disk: reserves
-- at a third of their rate, p99 of a second, until the table was
-- analyzed) instead of jobs_ready, which is in serving order.
CREATE INDEX jobs_ready_due ON delayq.jobs ((topic COLLATE "C"), due) WHERE state = 'ready';

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
    -- The topic's live counts (0003): a row of this session's own, so
    -- concurrent puts never wait on each other.
    INSERT INTO delayq.counts AS c (topic, slot, ready, delayed, reserved, buried, urgent)
    VALUES (put.topic, pg_backend_pid(), (v_state = 'ready')::int, (v_state = 'delayed')::int, 0, 0,
            (v_state = 'ready' AND put.priority < 1024)::int)
    ON CONFLICT ON CONSTRAINT counts_pkey DO UPDATE SET ready = c.ready + EXCLUDED.ready, delayed = c.delayed + EXCLUDED.delayed,
        urgent = c.urgent + EXCLUDED.urgent;
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

