// delayq dashboard: a small single-page app over the public v1 HTTP API.
// Views are chosen by the URL fragment (#/, #/topic/NAME?state=&cursor=,
// #/job/ID), so the server only serves static files. Every piece of data
// reaches the DOM as text nodes or attribute values, never as markup.
'use strict';

(() => {
  // API lists every endpoint the dashboard calls, as "METHOD /path". The Go
  // tests read this table and check each entry against the real handler.
  const API = {
    topics: 'GET /v1/topics',
    topic: 'GET /v1/topics/{topic}',
    jobs: 'GET /v1/topics/{topic}/jobs',
    kickTopic: 'POST /v1/topics/{topic}/kick',
    pauseTopic: 'POST /v1/topics/{topic}/pause',
    resumeTopic: 'POST /v1/topics/{topic}/resume',
    purgeJobs: 'DELETE /v1/topics/{topic}/jobs',
    policy: 'GET /v1/topics/{topic}/policy',
    putPolicy: 'PUT /v1/topics/{topic}/policy',
    deletePolicy: 'DELETE /v1/topics/{topic}/policy',
    history: 'GET /v1/topics/{topic}/history',
    due: 'GET /v1/topics/{topic}/due',
    job: 'GET /v1/jobs/{id}',
    deleteJob: 'DELETE /v1/jobs/{id}',
    kickJob: 'POST /v1/jobs/{id}/kick',
    updateJob: 'PATCH /v1/jobs/{id}',
    schedules: 'GET /v1/schedules',
    pauseSchedule: 'POST /v1/schedules/{name}/pause',
    resumeSchedule: 'POST /v1/schedules/{name}/resume',
    deleteSchedule: 'DELETE /v1/schedules/{name}',
    alarms: 'GET /v1/alarms',
    deleteAlarm: 'DELETE /v1/alarms/{name}',
    session: 'GET /v1/session',
    login: 'POST /v1/session',
    logout: 'DELETE /v1/session',
  };
  const STATES = ['ready', 'delayed', 'reserved', 'buried'];
  // Jobs that ended, kept for the server's --retain: listed by when they
  // ended, counted nowhere (a topic's stats count live jobs).
  const ENDED = ['finished', 'failed', 'deleted'];
  const ended = (state) => ENDED.includes(state);
  const REFRESH_MS = 3000;
  const PAGE_SIZE = 50;
  // ROOT is the path prefix a proxy may serve delayq under ("" when none):
  // the API lives beside /ui/, under the same prefix.
  const ROOT = location.pathname.replace(/\/ui\/.*$/, '');

  // The page never holds the token: the login form sends it once
  // (API.login), and the server answers with an HttpOnly session cookie
  // the browser sends with every API call (script cannot read it).

  const $ = (id) => document.getElementById(id);
  let generation = 0; // bumped by every navigation; stale renders drop out
  let refreshTimer = null;
  let pendingNotice = '';

  // call sends one API request and returns the decoded JSON answer, or
  // throws an Error carrying the server's {"error":{"message"}}. A 401
  // (no session, or it ended) shows the login page.
  async function call(name, params = {}, body, query) {
    try {
      return await send(name, params, body, query);
    } catch (e) {
      if (e.status === 401) showLogin(e.message);
      throw e;
    }
  }

  // send is call without the login page.
  async function send(name, params = {}, body, query) {
    const [method, template] = API[name].split(' ');
    let path = ROOT + template.replace(/\{(\w+)\}/g, (_, k) => encodeURIComponent(params[k]));
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query || {})) {
      if (v !== undefined && v !== '') q.set(k, v);
    }
    const qs = q.toString();
    if (qs) path += '?' + qs;
    const init = { method, headers: { Accept: 'application/json' } };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, { ...init, credentials: 'same-origin' });
    } catch (e) {
      throw new Error('cannot reach delayq: ' + e.message);
    }
    const text = await resp.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
    if (!resp.ok) {
      const msg = data && data.error && data.error.message;
      const err = new Error(msg || `${resp.status} ${resp.statusText}`);
      err.status = resp.status;
      throw err;
    }
    return data;
  }

  // el builds an element. Strings become text nodes, so data is never
  // parsed as HTML; "on..." attributes take listener functions.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children.flat(Infinity)) {
      if (c !== undefined && c !== null && c !== false) e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  const topicHref = (name, q) => {
    const qs = new URLSearchParams(q || {}).toString();
    return '#/topic/' + encodeURIComponent(name) + (qs ? '?' + qs : '');
  };
  const jobHref = (id) => '#/job/' + encodeURIComponent(id);

  // fmtDuration writes seconds as "1h 2m", "3m 4s" or "5.2s".
  function fmtDuration(sec) {
    sec = Math.abs(sec);
    if (sec < 60) return (sec < 10 ? sec.toFixed(1) : Math.round(sec)) + 's';
    const d = Math.floor(sec / 86400), h = Math.floor(sec % 86400 / 3600);
    const m = Math.floor(sec % 3600 / 60), s = Math.floor(sec % 60);
    if (d) return `${d}d ${h}h`;
    if (h) return `${h}h ${m}m`;
    return `${m}m ${s}s`;
  }

  // fmtWhen shows a wire time with how far it is from now.
  function fmtWhen(iso) {
    if (!iso) return '';
    const diff = (Date.parse(iso) - Date.now()) / 1000;
    const rel = Math.abs(diff) < 0.5 ? 'now' : diff > 0 ? 'in ' + fmtDuration(diff) : fmtDuration(diff) + ' ago';
    return el('span', { title: iso }, iso.replace('T', ' ').replace('Z', ' UTC'), el('span', { class: 'muted' }, ' (' + rel + ')'));
  }

  function bodyPreview(j) {
    if (j.body_base64 !== undefined) return el('span', { class: 'muted' }, 'binary, base64 ' + j.body_base64.slice(0, 40));
    const b = j.body || '';
    return b.length > 80 ? b.slice(0, 80) + '…' : b;
  }

  const badge = (state) => el('span', { class: 'badge ' + state }, state);

  function showError(e) {
    const box = $('error');
    box.textContent = e.message || String(e);
    box.hidden = false;
  }

  function notify(msg) {
    const box = $('notice');
    box.textContent = msg;
    box.hidden = !msg;
  }

  function setView(...children) {
    // Optional parts are null when absent; replaceChildren would show "null".
    $('view').replaceChildren(...children.filter((c) => c !== null && c !== undefined));
  }

  function crumbs(...items) {
    $('crumbs').replaceChildren(...items.flatMap((c, i) => (i ? [' › ', c] : [c])));
  }

  function stopRefresh() {
    clearTimeout(refreshTimer);
    refreshTimer = null;
  }

  // ---- topics overview ----

  async function showTopics(gen) {
    crumbs(el('a', { href: '#/' }, 'Topics'));
    const table = el('table', { id: 'topics' });
    const updated = el('span', { class: 'muted', id: 'updated' });
    const auto = el('input', { type: 'checkbox', id: 'auto', checked: true });
    auto.addEventListener('change', () => (auto.checked ? tick() : stopRefresh()));
    setView(
      el('div', { class: 'bar' },
        el('h1', null, 'Topics'),
        el('label', null, auto, ` auto-refresh every ${REFRESH_MS / 1000} s `), updated),
      table);
    const tick = async () => {
      stopRefresh();
      try {
        const data = await call('topics');
        if (gen !== generation) return;
        renderTopics(table, data.topics || []);
        $('error').hidden = true;
        updated.textContent = 'updated ' + new Date().toLocaleTimeString();
      } catch (e) {
        if (gen === generation) showError(e);
      }
      if (gen === generation && auto.checked) refreshTimer = setTimeout(tick, REFRESH_MS);
    };
    await tick();
  }

  function renderTopics(table, topics) {
    const head = el('tr', null, el('th', null, 'Topic'),
      STATES.map((s) => el('th', { class: 'num' }, s)),
      el('th', { class: 'num' }, 'oldest ready'), el('th', null, 'paused'));
    const rows = topics.map((t) => el('tr', null,
      el('td', null, el('a', { href: topicHref(t.name), class: 'topic-link' }, t.name)),
      STATES.map((s) => el('td', { class: 'num' + (s === 'buried' && t[s] ? ' warn' : '') },
        t[s] ? el('a', { href: topicHref(t.name, { state: s }) }, t[s]) : '0')),
      el('td', { class: 'num' }, t.ready ? fmtDuration(t.oldest_ready_age) : '–'),
      el('td', null, t.paused ? 'paused' : '')));
    if (!rows.length) {
      rows.push(el('tr', null, el('td', { colspan: 7, class: 'muted' }, 'No topics yet: a topic appears when a job is put in it.')));
    }
    table.replaceChildren(el('thead', null, head), el('tbody', null, rows));
  }

  // ---- one topic's jobs ----

  async function showTopic(gen, name, q) {
    const state = q.get('state') || '';
    const cursor = q.get('cursor') || '';
    const limit = q.get('limit') || '';
    crumbs(el('a', { href: '#/' }, 'Topics'), el('a', { href: topicHref(name) }, name));
    const [t, page, policy] = await Promise.all([
      call('topic', { topic: name }),
      call('jobs', { topic: name }, undefined, { state, cursor, limit: limit || PAGE_SIZE }),
      // A topic without a policy answers 404: show the empty form.
      call('policy', { topic: name }).catch((e) => { if (e.status === 404) return null; throw e; }),
    ]);
    if (gen !== generation) return;
    const keep = limit ? { limit } : {};
    const tabs = el('nav', { class: 'tabs', id: 'states' },
      ['', ...STATES, ...ENDED].map((s) => el('a', {
        href: topicHref(name, s ? { state: s, ...keep } : keep),
        class: (s === state ? 'current' : '') + (ended(s) ? ' ended' : '') || undefined,
        'data-state': s || 'all',
      }, s || 'all', ended(s) ? '' : s ? ` (${t[s]})` : ` (${STATES.reduce((n, x) => n + t[x], 0)})`)));
    const n = el('input', { type: 'number', min: 1, max: 4294967295, value: 10, id: 'kick-n', 'aria-label': 'jobs to kick' });
    const kick = el('form', { class: 'inline', id: 'kick-topic' },
      'Kick up to ', n, ' jobs ', el('button', { type: 'submit' }, 'Kick'),
      el('span', { class: 'muted' }, ' (buried ones if any, else delayed ones, become ready)'));
    kick.addEventListener('submit', (ev) => {
      ev.preventDefault();
      act(async () => {
        const r = await call('kickTopic', { topic: name }, { n: Number(n.value) });
        const kind = r.state ? `${r.state} ` : '';
        return `Kicked ${r.kicked} ${kind}job(s) of ${name}.`;
      });
    });
    setView(
      el('div', { class: 'bar' }, el('h1', null, 'Topic ', el('code', null, name)),
        t.paused ? el('span', { class: 'badge buried' }, 'paused') : null,
        el('button', { type: 'button', onclick: () => route() }, 'Refresh')),
      tabs, kick, pauseControl(name, t.paused), state && !ended(state) ? purgeControl(name, state, t[state]) : null,
      ended(state) ? el('p', { class: 'muted', id: 'ended-note' }, `Jobs that ${state === 'finished' ? 'finished' : state === 'failed' ? 'failed for good (deleted while buried)' : 'were deleted without finishing'}, most recent last, kept for the server's --retain.`) : null,
      jobsTable(page.jobs || [], ended(state)),
      pager(name, state, limit, cursor, page.next),
      policyControl(name, policy),
      // The charts (charts.js) refresh themselves while this view lasts.
      window.DelayqCharts.mount(name, { call, el, alive: () => gen === generation }));
  }

  // pauseControl pauses a topic's reserves for a while (or until resumed)
  // or resumes a paused one; puts keep working either way.
  function pauseControl(name, paused) {
    if (paused) {
      return el('div', { class: 'inline', id: 'pause-topic' },
        el('button', { type: 'button', id: 'resume-topic', onclick: () => act(async () => {
          await call('resumeTopic', { topic: name });
          return `Resumed topic ${name}: its ready jobs can be reserved again.`;
        }) }, 'Resume'),
        el('span', { class: 'muted' }, ' Reserves skip this topic while it is paused; puts still work.'));
    }
    const d = el('input', { id: 'pause-for', value: '10m', size: 6, 'aria-label': 'pause for' });
    const form = el('form', { class: 'inline', id: 'pause-topic' },
      'Pause reserves for ', d, ' ', el('button', { type: 'submit' }, 'Pause'),
      el('span', { class: 'muted' }, ' (e.g. 30s, 10m, 2h; empty: until resumed)'));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const v = d.value.trim();
      act(async () => {
        await call('pauseTopic', { topic: name }, v ? { for: v } : {});
        return v ? `Paused topic ${name} for ${v}.` : `Paused topic ${name} until resumed.`;
      });
    });
    return form;
  }

  // policySummary says in one line what a topic's policy does.
  function policySummary(p) {
    if (!p) return 'No policy: jobs take the server defaults, retries are ready at once, no bound on jobs.';
    const parts = [];
    if (p.ttr) parts.push(`ttr ${p.ttr}`);
    if (p.max_attempts) parts.push(`max attempts ${p.max_attempts}`);
    if (p.backoff) {
      const b = p.backoff;
      parts.push(`backoff ${b.initial} ×${b.factor} up to ${b.max}` + (b.jitter ? ` ±${Math.round(b.jitter * 100)}%` : ''));
    }
    if (p.max_jobs) parts.push(`max jobs ${p.max_jobs}`);
    return parts.join(' · ');
  }

  // policyControl shows the topic's policy and sets or clears it. Empty
  // fields are left out of the request; the server names what it refuses.
  function policyControl(name, p) {
    const b = (p && p.backoff) || {};
    const field = (id, label, value, hint) => el('label', null, label + ' ',
      el('input', { id, value: value === undefined || value === null ? '' : String(value), size: 7, 'aria-label': label }),
      hint ? el('span', { class: 'muted' }, ' ' + hint) : null);
    const form = el('form', { id: 'policy-form', class: 'policy' },
      field('policy-ttr', 'ttr', p && p.ttr, '(default for jobs put without one)'),
      field('policy-max-attempts', 'max attempts', p && p.max_attempts),
      field('policy-max-jobs', 'max jobs', p && p.max_jobs, '(puts beyond are refused)'),
      field('policy-backoff-initial', 'backoff', b.initial, '(first retry delay; empty: none)'),
      field('policy-backoff-max', 'up to', b.max),
      field('policy-backoff-factor', 'factor', b.factor),
      field('policy-backoff-jitter', 'jitter', b.jitter, '(0 to 1)'),
      el('div', { class: 'actions' },
        el('button', { type: 'submit', id: 'policy-save' }, p ? 'Save policy' : 'Set policy'),
        p ? el('button', { type: 'button', class: 'danger', id: 'policy-clear', onclick: () => {
          if (!confirm(`Clear the policy of ${name}? Its jobs keep what they were put with.`)) return;
          act(async () => {
            await call('deletePolicy', { topic: name });
            return `Cleared the policy of topic ${name}.`;
          });
        } }, 'Clear policy') : null));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const v = (id) => $(id).value.trim();
      // Numbers go as numbers when they read as one, so the server's
      // answer (not the browser) decides what is valid.
      const num = (x) => (x !== '' && !Number.isNaN(Number(x)) ? Number(x) : x);
      const body = {};
      if (v('policy-ttr')) body.ttr = v('policy-ttr');
      if (v('policy-max-attempts')) body.max_attempts = num(v('policy-max-attempts'));
      if (v('policy-max-jobs')) body.max_jobs = num(v('policy-max-jobs'));
      if (v('policy-backoff-initial')) {
        body.backoff = { initial: v('policy-backoff-initial') };
        if (v('policy-backoff-max')) body.backoff.max = v('policy-backoff-max');
        if (v('policy-backoff-factor')) body.backoff.factor = num(v('policy-backoff-factor'));
        if (v('policy-backoff-jitter')) body.backoff.jitter = num(v('policy-backoff-jitter'));
      }
      act(async () => {
        await call('putPolicy', { topic: name }, body);
        return `Saved the policy of topic ${name}.`;
      });
    });
    return el('section', { id: 'policy' },
      el('h2', null, 'Policy'),
      el('p', { id: 'policy-summary' }, policySummary(p)),
      form);
  }

  // purgeControl deletes every job of the topic in the shown state, after
  // a confirmation that names the count.
  function purgeControl(name, state, count) {
    if (!count) return null;
    return el('div', { class: 'inline' },
      el('button', { type: 'button', class: 'danger', id: 'purge', onclick: () => {
        if (!confirm(`Delete all ${count} ${state} job(s) of ${name}? This cannot be undone.`)) return;
        act(async () => {
          const r = await call('purgeJobs', { topic: name }, undefined, { state });
          return `Deleted ${r.deleted} ${state} job(s) of ${name}.`;
        });
      } }, `Delete all ${count} ${state}…`));
  }

  // jobsTable lists jobs; for jobs that ended (isEnded) the time column
  // is when they ended rather than when they were due.
  function jobsTable(jobs, isEnded) {
    const head = el('tr', null, ['ID', 'Seq', 'State', 'Priority', 'Attempts', isEnded ? 'Ended' : 'Due', 'Last failure', 'Body']
      .map((h) => el('th', { class: ['Seq', 'Priority', 'Attempts'].includes(h) ? 'num' : undefined }, h)));
    const rows = jobs.map((j) => el('tr', null,
      el('td', null, el('a', { href: jobHref(j.id), class: 'job-link' }, j.id)),
      el('td', { class: 'num' }, j.seq),
      el('td', null, badge(j.state)),
      el('td', { class: 'num' }, j.priority),
      el('td', { class: 'num' }, j.attempts + (j.max_attempts ? ' / ' + j.max_attempts : '')),
      el('td', null, fmtWhen(isEnded ? j.ended_at : j.due)),
      el('td', { class: 'reason' }, j.last_failed ? (j.last_reason || 'no reason given') : ''),
      el('td', { class: 'body' }, bodyPreview(j))));
    if (!rows.length) rows.push(el('tr', null, el('td', { colspan: 8, class: 'muted' }, 'No jobs.')));
    return el('table', { id: 'jobs' }, el('thead', null, head), el('tbody', null, rows));
  }

  function pager(name, state, limit, cursor, next) {
    const base = {};
    if (state) base.state = state;
    if (limit) base.limit = limit;
    return el('nav', { class: 'pager' },
      cursor ? el('a', { href: topicHref(name, base), id: 'first-page' }, '« First page') : null,
      next ? el('a', { href: topicHref(name, { ...base, cursor: next }), id: 'next-page' }, 'Next page »') : null);
  }

  // ---- one job ----

  async function showJob(gen, id) {
    crumbs(el('a', { href: '#/' }, 'Topics'), el('span', null, 'job ' + id));
    const j = await call('job', { id });
    if (gen !== generation) return;
    crumbs(el('a', { href: '#/' }, 'Topics'), el('a', { href: topicHref(j.topic) }, j.topic), el('span', null, j.id));
    const fields = [
      ['id', el('code', null, j.id)],
      ['seq', j.seq],
      ['topic', el('a', { href: topicHref(j.topic) }, j.topic)],
      ['state', badge(j.state)],
      ['priority', j.priority + ' (lower runs first)'],
      ['ttr', j.ttr + ' s'],
      ['attempts', j.attempts + ' of ' + (j.max_attempts || 'unlimited')],
      ['counts', `${j.timeouts || 0} TTR expiries, ${j.releases || 0} releases, ${j.buries || 0} buries, ${j.kicks || 0} kicks`],
      ['due', fmtWhen(j.due)],
      ['created', fmtWhen(j.created)],
    ];
    if (j.reservation) fields.push(['reservation', el('code', null, j.reservation)]);
    if (j.deadline) fields.push(['deadline', fmtWhen(j.deadline)]);
    if (j.last_failed) {
      fields.push(['last reason', el('span', { class: 'reason' }, j.last_reason || 'no reason given')]);
      fields.push(['last failed', fmtWhen(j.last_failed)]);
    }
    if (j.ended_at) fields.push(['ended', fmtWhen(j.ended_at)]);
    setView(
      el('div', { class: 'bar' }, el('h1', null, 'Job ', el('code', null, j.id)),
        el('button', { type: 'button', onclick: () => route() }, 'Refresh')),
      el('dl', { id: 'job' }, fields.map(([k, v]) => [el('dt', null, k), el('dd', { 'data-field': k }, v)])),
      ended(j.state)
        ? el('p', { class: 'muted', id: 'ended-note' }, 'This job has ended; it is kept, read-only, for the server\'s --retain, and a put of its id is refused meanwhile.')
        : jobActions(j),
      attemptsTable(j.history || []), jobBody(j));
  }

  // attemptsTable shows the job's attempts (its last 20), oldest first:
  // when each was reserved, by whom, when and how it ended, and why.
  function attemptsTable(history) {
    const head = el('tr', null, ['#', 'Reserved', 'By', 'Ended', 'Outcome', 'Reason']
      .map((h) => el('th', { class: h === '#' ? 'num' : undefined }, h)));
    const rows = history.map((a) => el('tr', { 'data-attempt': a.attempt },
      el('td', { class: 'num' }, a.attempt),
      el('td', null, fmtWhen(a.reserved_at)),
      el('td', null, el('code', null, a.by)),
      el('td', null, a.ended_at ? fmtWhen(a.ended_at) : ''),
      el('td', null, a.outcome ? badge(a.outcome) : el('span', { class: 'muted' }, 'running')),
      el('td', { class: 'reason' }, a.reason || '')));
    if (!rows.length) rows.push(el('tr', null, el('td', { colspan: 6, class: 'muted' }, 'Never reserved.')));
    return el('section', null,
      el('h2', null, 'Attempts ', el('span', { class: 'muted' }, '(the last 20, oldest first)')),
      el('table', { id: 'attempts' }, el('thead', null, head), el('tbody', null, rows)));
  }

  function jobBody(j) {
    if (j.body_base64 !== undefined) {
      return el('section', null,
        el('h2', null, 'Body ', el('span', { class: 'muted' }, '(not valid UTF-8, shown as base64)')),
        el('pre', { id: 'body' }, j.body_base64));
    }
    const body = j.body || '';
    return el('section', null,
      el('h2', null, 'Body ', el('span', { class: 'muted' }, `(text, ${new TextEncoder().encode(body).length} bytes)`)),
      el('pre', { id: 'body' }, body));
  }

  // jobActions offers what the job's state allows: kick moves a buried or
  // delayed job to ready, "run now" makes a delayed one due now, a new
  // delay reschedules any job that is not reserved, delete works always.
  function jobActions(j) {
    const id = j.id;
    const buttons = [];
    const button = (label, idAttr, fn) => buttons.push(el('button', { type: 'button', id: idAttr, onclick: () => act(fn) }, label));
    if (j.state === 'buried') button('Retry (kick)', 'kick', async () => { await call('kickJob', { id }); return `Kicked job ${id}: it is ready.`; });
    if (j.state === 'delayed') button('Run now', 'run-now', async () => { await call('updateJob', { id }, { delay: 0 }); return `Job ${id} is due now.`; });
    buttons.push(el('button', { type: 'button', id: 'delete', class: 'danger', onclick: () => deleteJob(j) }, 'Delete'));
    return el('div', { class: 'actions' }, buttons,
      j.state === 'reserved' ? el('span', { class: 'muted' }, ' Reserved by a consumer: deleting it makes that consumer\'s finish fail.') : null,
      j.state !== 'reserved' ? rescheduleForm(id) : null);
  }

  // rescheduleForm gives a job that is not reserved a new delay from now.
  function rescheduleForm(id) {
    const d = el('input', { id: 'reschedule-delay', value: '5m', size: 6, required: true, 'aria-label': 'new delay from now' });
    const form = el('form', { class: 'inline', id: 'reschedule' },
      'Reschedule to run in ', d, ' ', el('button', { type: 'submit' }, 'Reschedule'),
      el('span', { class: 'muted' }, ' (e.g. 30s, 15m, 2h)'));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const v = d.value.trim();
      act(async () => {
        await call('updateJob', { id }, { delay: v });
        return `Job ${id} rescheduled to run in ${v}.`;
      });
    });
    return form;
  }

  function deleteJob(j) {
    if (!confirm(`Delete job ${j.id} (topic ${j.topic}, ${j.state})? This cannot be undone.`)) return;
    act(async () => {
      await call('deleteJob', { id: j.id });
      pendingNotice = `Deleted job ${j.id}.`;
      location.hash = topicHref(j.topic).slice(1);
      return null; // the topic view shows the notice
    });
  }

  // act runs an action, then shows its message and redraws the view.
  async function act(fn) {
    $('error').hidden = true;
    try {
      const msg = await fn();
      if (msg === null) return;
      if (msg) {
        pendingNotice = msg;
        await route();
      }
    } catch (e) {
      if (e.status !== 401) showError(e); // else the login form shows
    }
  }

  // ---- schedules (periodic jobs) ----

  async function showSchedules(gen) {
    crumbs(el('a', { href: '#/' }, 'Topics'), el('a', { href: '#/schedules' }, 'Schedules'));
    const data = await call('schedules');
    if (gen !== generation) return;
    const head = el('tr', null, ['Name', 'Topic', 'Cron', 'Time zone', 'Next fire times', 'Last', 'Status', '']
      .map((h) => el('th', null, h)));
    const rows = (data.schedules || []).map((s) => el('tr', { 'data-schedule': s.name },
      el('td', null, el('code', null, s.name)),
      el('td', null, el('a', { href: topicHref(s.topic) }, s.topic)),
      el('td', null, el('code', null, s.cron)),
      el('td', null, s.timezone),
      el('td', { class: 'next' }, s.paused ? el('span', { class: 'muted' }, 'paused') :
        el('ol', { class: 'times' }, (s.next || []).map((t) => el('li', null, fmtWhen(t))))),
      el('td', null, s.last ? fmtWhen(s.last) : el('span', { class: 'muted' }, 'not yet')),
      el('td', null, s.paused ? el('span', { class: 'badge buried' }, 'paused') : el('span', { class: 'badge ready' }, 'active')),
      el('td', { class: 'sched-actions' },
        s.paused
          ? el('button', { type: 'button', class: 'resume', onclick: () => act(async () => {
            await call('resumeSchedule', { name: s.name });
            return `Resumed schedule ${s.name}: it fires from now on.`;
          }) }, 'Resume')
          : el('button', { type: 'button', class: 'pause', onclick: () => act(async () => {
            await call('pauseSchedule', { name: s.name });
            return `Paused schedule ${s.name}.`;
          }) }, 'Pause'),
        el('button', { type: 'button', class: 'danger delete', onclick: () => {
          if (!confirm(`Delete schedule ${s.name}? Jobs it already put stay.`)) return;
          act(async () => {
            await call('deleteSchedule', { name: s.name });
            return `Deleted schedule ${s.name}.`;
          });
        } }, 'Delete'))));
    if (!rows.length) {
      rows.push(el('tr', null, el('td', { colspan: 8, class: 'muted' },
        'No schedules: create one with `delayq schedule add` or over the HTTP API.')));
    }
    setView(
      el('div', { class: 'bar' }, el('h1', null, 'Schedules'),
        el('button', { type: 'button', onclick: () => route() }, 'Refresh')),
      el('table', { id: 'schedules' }, el('thead', null, head), el('tbody', null, rows)));
  }

  // ---- alarms ----

  // whenText lists an alarm's conditions as "buried_over 3, oldest_ready_over 5m0s".
  function whenText(w) {
    return ['buried_over', 'oldest_ready_over', 'lateness_p99_over', 'failures_per_min_over']
      .filter((k) => w && w[k] !== undefined && w[k] !== null)
      .map((k) => `${k} ${w[k]}`).join(', ');
  }

  // num writes a condition's value: whole numbers as they are, others
  // (seconds, rates) to two decimals.
  const num = (v) => (Number.isInteger(v) ? String(v) : v.toFixed(2));

  async function showAlarms(gen) {
    crumbs(el('a', { href: '#/' }, 'Topics'), el('a', { href: '#/alarms' }, 'Alarms'));
    const data = await call('alarms');
    if (gen !== generation) return;
    const head = el('tr', null, ['Name', 'State', 'Topics', 'When', 'Repeat', 'URL', 'Firing', '']
      .map((h) => el('th', null, h)));
    const rows = (data.alarms || []).map((a) => {
      const firing = (a.conditions || []).filter((c) => c.firing);
      return el('tr', { 'data-alarm': a.name, 'data-state': a.state },
        el('td', null, el('code', null, a.name)),
        el('td', null, el('span', { class: a.state === 'firing' ? 'badge buried' : 'badge ready' }, a.state)),
        el('td', null, (a.topics && a.topics.length) ? a.topics.join(', ') : el('span', { class: 'muted' }, 'all')),
        el('td', null, whenText(a.when)),
        el('td', null, a.repeat || el('span', { class: 'muted' }, 'never')),
        el('td', null, el('code', null, a.url)),
        el('td', { class: 'firing' }, firing.length
          ? el('ul', { class: 'times' }, firing.map((c) => el('li', { 'data-topic': c.topic },
            el('a', { href: topicHref(c.topic) }, c.topic), ` ${c.condition}: ${num(c.value)} > ${num(c.threshold)}`,
            c.since ? ' since ' : '', c.since ? fmtWhen(c.since) : '')))
          : el('span', { class: 'muted' }, 'none')),
        el('td', null, el('button', { type: 'button', class: 'danger delete', onclick: () => {
          if (!confirm(`Delete alarm ${a.name}? A firing alarm sends no resolved event.`)) return;
          act(async () => {
            await call('deleteAlarm', { name: a.name });
            return `Deleted alarm ${a.name}.`;
          });
        } }, 'Delete')));
    });
    if (!rows.length) {
      rows.push(el('tr', null, el('td', { colspan: 8, class: 'muted' },
        'No alarms: set one with `delayq alarm set` or over the HTTP API.')));
    }
    setView(
      el('div', { class: 'bar' }, el('h1', null, 'Alarms'),
        el('button', { type: 'button', onclick: () => route() }, 'Refresh')),
      el('table', { id: 'alarms' }, el('thead', null, head), el('tbody', null, rows)));
  }

  // ---- login ----

  // showUser shows who is signed in, with the logout button, when the
  // server has tokens (a server without them needs no login).
  function showUser(session) {
    $('user').hidden = !(session && session.auth);
    $('user-name').textContent = session && session.auth ? session.name : '';
  }

  // showLogin replaces the view with the login form; after a login the
  // view the hash names is shown.
  function showLogin(reason) {
    generation++; // renders still in flight drop out
    stopRefresh();
    showUser(null);
    crumbs();
    $('error').hidden = true;
    notify('');
    const token = el('input', { type: 'password', id: 'login-token', name: 'token', required: true,
      autocomplete: 'current-password', size: 40, 'aria-label': 'token' });
    const msg = el('p', { id: 'login-error', role: 'alert', class: 'warn', hidden: !reason }, reason || '');
    const form = el('form', { id: 'login' },
      el('h1', null, 'Log in'),
      el('p', { class: 'muted' }, 'This delayq server needs a token: one of its auth file (a read or admin scope shows everything).'),
      el('label', null, 'Token ', token), ' ', el('button', { type: 'submit' }, 'Log in'), msg);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      try {
        const session = await send('login', {}, { token: token.value.trim() });
        token.value = '';
        showUser(session);
        await route();
      } catch (e) {
        msg.textContent = e.message;
        msg.hidden = false;
        token.select();
      }
    });
    setView(form);
    token.focus();
  }

  $('logout').addEventListener('click', async () => {
    try {
      await send('logout');
    } catch (e) {
      showError(e);
      return;
    }
    showLogin('Logged out.');
  });

  // start learns who the page runs as (API.session), then shows the
  // view, or the login form when the server needs a token.
  async function start() {
    try {
      showUser(await send('session'));
    } catch (e) {
      if (e.status === 401) {
        showLogin('');
        return;
      }
      showError(e);
    }
    await route();
  }

  // ---- routing ----

  async function route() {
    const gen = ++generation;
    stopRefresh();
    $('error').hidden = true;
    const notice = pendingNotice; // shown with the view it is about
    pendingNotice = '';
    notify('');
    const hash = location.hash.replace(/^#/, '') || '/';
    const [path, qs] = hash.split('?', 2);
    const parts = path.split('/');
    try {
      if (parts[1] === 'topic' && parts[2]) {
        await showTopic(gen, decodeURIComponent(parts.slice(2).join('/')), new URLSearchParams(qs || ''));
      } else if (parts[1] === 'schedules') {
        await showSchedules(gen);
      } else if (parts[1] === 'alarms') {
        await showAlarms(gen);
      } else if (parts[1] === 'job' && parts[2]) {
        await showJob(gen, decodeURIComponent(parts[2]));
      } else {
        await showTopics(gen);
      }
      if (gen === generation) notify(notice);
    } catch (e) {
      if (gen !== generation || e.status === 401) return; // the login form shows
      setView(el('p', { class: 'muted' }, 'Nothing to show.'));
      showError(e);
    }
  }

  $('find').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const id = $('find-id').value.trim();
    if (id) location.hash = jobHref(id).slice(1);
  });
  window.addEventListener('hashchange', () => { if (!$('login')) route(); });
  start();
})();
