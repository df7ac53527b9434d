-- delayq schema version 1: the jobs table, documents, chart series,
-- pauses, instances, and the transactional put functions.
-- "delayq" below is replaced by the configured schema name (quoted).

CREATE SEQUENCE delayq.job_seq AS bigint;

-- One row per job, live or retained. Timer-facing times are timestamptz
-- with millisecond values; durations are whole milliseconds.
CREATE TABLE delayq.jobs (
    seq          bigint PRIMARY KEY,
    id           text NOT NULL,
    topic        text NOT NULL,
    state        text NOT NULL CHECK (state IN ('ready','delayed','reserved','buried','finished','deleted','failed')),
    priority     bigint NOT NULL,
    due          timestamptz NOT NULL,
    created      timestamptz NOT NULL,
    delay_ms     bigint NOT NULL DEFAULT 0,
    ttr_ms       bigint NOT NULL,
    max_attempts integer NOT NULL DEFAULT 0,
    attempts     integer NOT NULL DEFAULT 0,
    reservation  text NOT NULL DEFAULT '',
    deadline     timestamptz,
    timeouts     integer NOT NULL DEFAULT 0,
    releases     integer NOT NULL DEFAULT 0,
    buries       integer NOT NULL DEFAULT 0,
    kicks        integer NOT NULL DEFAULT 0,
    last_reason  text NOT NULL DEFAULT '',
    last_failed  timestamptz,
    history      jsonb,
    ended        timestamptz,          -- set on retained jobs only
    expires      timestamptz,          -- ended + retention: when the id is free again
    body         bytea                 -- NULL on a retained job whose body is not kept
) WITH (fillfactor = 80,
        autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_cost_delay = 0,
        autovacuum_analyze_scale_factor = 0.02);

-- A job id is taken while its job is live or retained.
CREATE UNIQUE INDEX jobs_id ON delayq.jobs (id);
-- Reserve: per topic, in serving order.
CREATE INDEX jobs_ready ON delayq.jobs (topic, priority, seq) WHERE state = 'ready';
-- The timer: delayed jobs by due time, reserved jobs by deadline.
CREATE INDEX jobs_due ON delayq.jobs (due, seq) WHERE state = 'delayed';
CREATE INDEX jobs_deadline ON delayq.jobs (deadline, seq) WHERE state = 'reserved';
-- List, Kick and the due counts of one topic.
CREATE INDEX jobs_topic_due ON delayq.jobs (topic, due, seq) WHERE state IN ('delayed', 'buried');
CREATE INDEX jobs_topic_deadline ON delayq.jobs (topic, deadline, seq) WHERE state = 'reserved';
-- Retained jobs: expiry in bounded batches, and List by end time.
CREATE INDEX jobs_expires ON delayq.jobs (expires, seq) WHERE ended IS NOT NULL;
CREATE INDEX jobs_ended ON delayq.jobs (topic, state, ended, seq) WHERE ended IS NOT NULL;

CREATE TABLE delayq.pauses (
    topic text PRIMARY KEY,
    until timestamptz NOT NULL
);

CREATE TABLE delayq.docs (
    kind text NOT NULL,
    name text NOT NULL,
    rev  bigint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (kind, name)
);

CREATE TABLE delayq.series (
    topic        text NOT NULL,
    step_s       integer NOT NULL,
    start_s      bigint NOT NULL,
    ready        integer NOT NULL,
    delayed      integer NOT NULL,
    reserved     integer NOT NULL,
    buried       integer NOT NULL,
    fires        bigint NOT NULL,
    finishes     bigint NOT NULL,
    failures     bigint NOT NULL,
    lateness     jsonb,
    lateness_max_ms bigint NOT NULL,
    expires_s    bigint NOT NULL,
    PRIMARY KEY (topic, step_s, start_s)
);
CREATE INDEX series_expires ON delayq.series (expires_s);

CREATE TABLE delayq.instances (
    id        text PRIMARY KEY,
    url       text NOT NULL DEFAULT '',
    protocols text NOT NULL DEFAULT '',
    since     timestamptz NOT NULL,
    seen      timestamptz NOT NULL,
    timer     boolean NOT NULL DEFAULT false  -- holds the timer lease
);

-- Settings the servers publish for the SQL functions (max_body).
CREATE TABLE delayq.settings (
    name  text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO delayq.settings VALUES ('max_body', '65535');

-- Every committed change that gives a topic ready jobs, or makes an
-- earlier due time or deadline, tells the servers through NOTIFY, which
-- Postgres delivers at COMMIT (never for a rolled-back transaction).
-- Payloads: 'r <count> <topic>' and 'd <unix ms>'.
CREATE FUNCTION delayq.notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
    earliest timestamptz;
BEGIN
    FOR r IN SELECT topic, count(*) AS n FROM new_jobs WHERE state = 'ready' GROUP BY topic LOOP
        PERFORM pg_notify('delayq_channel', 'r ' || r.n || ' ' || r.topic);
    END LOOP;
    SELECT min(CASE WHEN state = 'delayed' THEN due ELSE deadline END) INTO earliest
      FROM new_jobs WHERE state IN ('delayed', 'reserved');
    IF earliest IS NOT NULL THEN
        PERFORM pg_notify('delayq_channel', 'd ' || (extract(epoch FROM earliest) * 1000)::bigint);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_notify_insert AFTER INSERT ON delayq.jobs
    REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION delayq.notify_jobs();
CREATE TRIGGER jobs_notify_update AFTER UPDATE ON delayq.jobs
    REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION delayq.notify_jobs();

-- raise_exists raises delayq's duplicate-id error, SQLSTATE DQ001, with
-- the taken job's state in DETAIL ('state=ready').
CREATE FUNCTION delayq.raise_exists(p_id text, p_state text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'delayq: job id % exists (%)', p_id, p_state
        USING ERRCODE = 'DQ001', DETAIL = 'state=' || p_state, HINT = 'the id is taken until the job ends and its retention runs out';
END $$;

-- raise_invalid raises delayq's bad-input error, SQLSTATE DQ002; DETAIL
-- names the field.
CREATE FUNCTION delayq.raise_invalid(p_field text, p_msg text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'delayq: bad %: %', p_field, p_msg USING ERRCODE = 'DQ002', DETAIL = 'field=' || p_field;
END $$;

-- uuid_v7 makes a job id as the server does when none is given.
CREATE FUNCTION delayq.uuid_v7() RETURNS text LANGUAGE sql VOLATILE AS $$
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
        substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
        FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid::text
$$;

-- put puts one job inside the caller's transaction: it exists, and
-- fires, only if that transaction commits. It is due after delay, or at
-- at when given (a time past makes it ready at once), by the database's
-- clock, rounded up to the millisecond so it never fires early. The checks are the server's:
-- topic and id names, body size, TTR at least 1 s, priority 0..2^32-1,
-- no negative delay, and the id not taken by a live or retained job.
CREATE FUNCTION delayq.put(
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
    -- A retained job whose retention ran out no longer holds its id.
    DELETE FROM delayq.jobs j WHERE j.id = v_id AND j.expires <= v_now;
    v_seq := nextval('delayq.job_seq');
    INSERT INTO delayq.jobs AS j (seq, id, topic, state, priority, due, created, delay_ms, ttr_ms, max_attempts, body)
    VALUES (v_seq, v_id, put.topic, v_state, put.priority, v_due, v_now, v_delay, v_ttr, put.max_attempts, put.body)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        SELECT j.state INTO taken FROM delayq.jobs j WHERE j.id = v_id;
        PERFORM delayq.raise_exists(v_id, coalesce(taken.state, 'unknown'));
    END IF;
    job_id := v_id;
    job_seq := v_seq;
    RETURN NEXT;
END $$;

-- put_batch puts several jobs in one call: jobs is a JSON array of
-- objects {"topic", "body" (text) or "body_base64", "delay_ms" or "at"
-- (RFC 3339), "id", "priority", "ttr_ms", "max_attempts"}; a field left
-- out takes put's
-- default. All or none: a bad or duplicate job raises, and the caller's
-- transaction decides.
CREATE FUNCTION delayq.put_batch(jobs jsonb) RETURNS TABLE (job_id text, job_seq bigint) LANGUAGE plpgsql AS $$
DECLARE
    j jsonb;
BEGIN
    IF jsonb_typeof(put_batch.jobs) IS DISTINCT FROM 'array' THEN
        PERFORM delayq.raise_invalid('jobs', 'is not a JSON array');
    END IF;
    IF jsonb_array_length(put_batch.jobs) > 1000 THEN
        PERFORM delayq.raise_invalid('jobs', format('%s jobs, more than the 1000 of a batch', jsonb_array_length(put_batch.jobs)));
    END IF;
    FOR j IN SELECT value FROM jsonb_array_elements(put_batch.jobs) LOOP
        RETURN QUERY SELECT * FROM delayq.put(
            j->>'topic',
            CASE WHEN j ? 'body_base64' THEN decode(j->>'body_base64', 'base64') ELSE convert_to(j->>'body', 'UTF8') END,
            coalesce((j->>'delay_ms')::bigint, 0) * interval '1 millisecond',
            j->>'id',
            coalesce((j->>'priority')::bigint, 1024),
            coalesce((j->>'ttr_ms')::bigint, 60000) * interval '1 millisecond',
            coalesce((j->>'max_attempts')::integer, 0),
            (j->>'at')::timestamptz);
    END LOOP;
END $$;
