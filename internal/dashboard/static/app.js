// delayq dashboard: a small single-page app over the public v1 HTTP API.
// Views are chosen by the URL fragment (#/, #/topic/NAME?state=&cursor=,
// #/job/ID, #/schedules, #/alarms; anything else is the not-found page),
// so the server only serves static files. Every piece of data
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
    putSchedule: 'PUT /v1/schedules/{name}',
    pauseSchedule: 'POST /v1/schedules/{name}/pause',
    resumeSchedule: 'POST /v1/schedules/{name}/resume',
    deleteSchedule: 'DELETE /v1/schedules/{name}',
    alarms: 'GET /v1/alarms',
    putAlarm: 'PUT /v1/alarms/{name}',
    deleteAlarm: 'DELETE /v1/alarms/{name}',
    cluster: 'GET /v1/cluster',
    session: 'GET /v1/session',
    login: 'POST /v1/session',
    logout: 'DELETE /v1/session',
  };
  const STATES = ['ready', 'delayed', 'reserved', 'buried'];
  // Jobs that ended, kept for the server's --retain: listed by when they
  // ended, counted nowhere (a topic's stats count live jobs).
  const ENDED = ['finished', 'failed', 'deleted'];
  // MEANING says what each state is, in docs/states.md's words (the one
  // definition the API, the CLI, the metrics and this page share).
  const MEANING = {
    delayed: 'waiting for its due time',
    ready: 'due, waiting for a consumer',
    reserved: 'held by a consumer until its deadline',
    buried: 'failed: its consumer buried it, or its last allowed attempt ended without a finish; it waits for a retry (kick) or a delete',
    finished: 'ended: its consumer finished it',
    failed: 'ended: deleted while buried, never retried',
    deleted: 'ended: deleted while not buried, without a finish',
  };
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
  // session is who the page runs as (API.session): name, scopes, topic
  // globs and the server's scope table (needs). Without tokens (auth
  // false) everything is allowed.
  let session = { auth: false };

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

  // fmtTime is the one way the dashboard writes a moment: the date and
  // the time to the second in UTC, with the zone, as the server logs
  // (2026-11-28 17:13:17 UTC). The wire's milliseconds are in the title.
  const fmtTime = (ms) => new Date(ms).toISOString().slice(0, 19).replace('T', ' ') + ' UTC';

  // fmtWhen shows a wire time with how far it is from now.
  function fmtWhen(iso) {
    if (!iso) return '';
    const at = Date.parse(iso);
    const diff = (at - Date.now()) / 1000;
    const rel = Math.abs(diff) < 0.5 ? 'now' : diff > 0 ? 'in ' + fmtDuration(diff) : fmtDuration(diff) + ' ago';
    return el('span', { title: iso, class: 'time' }, fmtTime(at), el('span', { class: 'muted' }, ' (' + rel + ')'));
  }

  // ---- what the token may do ----

  // match is auth.Match: '*' matches any run of characters ('/' too),
  // '?' any one, everything else itself.
  function match(glob, topic) {
    const re = new RegExp('^' + glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[\\s\\S]*').replace(/\?/g, '[\\s\\S]') + '$');
    return re.test(topic);
  }

  const hasScope = (s) => (session.scopes || []).some((x) => x === s || x === 'admin');
  const onTopic = (s, topic) => hasScope(s) && (session.topics || []).some((g) => match(g, topic));
  const onEvery = (s) => hasScope(s) && (session.topics || []).includes('*');

  // denied says why the session may not call API entry name (on topic,
  // for a route that names one or a job), or '' when it may: the server's
  // own table (session.needs) says what each route asks.
  function denied(name, topic) {
    if (!session.auth) return '';
    const need = (session.needs || {})[API[name]];
    if (!need) return 'this server does not say what this needs';
    for (const s of need.scopes) {
      if (need.on === 'every' && !onEvery(s)) return `needs the ${s} scope on every topic`;
      if ((need.on === 'topics' || need.on === 'jobs') && !onTopic(s, topic || '')) {
        return hasScope(s) ? `needs the ${s} scope on topic ${topic}` : `needs the ${s} scope`;
      }
    }
    return '';
  }

  // guard disables every control of node when the session may not call
  // API entry name, and says why in each one's tooltip and beside it.
  function guard(node, name, topic) {
    const why = denied(name, topic);
    if (!why || !node) return node;
    const controls = node.matches('button, input, select, textarea') ? [node] : [...node.querySelectorAll('button, input, select, textarea')];
    for (const c of controls) {
      c.disabled = true;
      c.title = 'Your token ' + why;
      c.setAttribute('data-denied', why);
    }
    node.classList.add('denied');
    if (!node.matches('button')) node.append(el('span', { class: 'muted why' }, ` (your token ${why})`));
    return node;
  }

  function bodyPreview(j) {
    if (j.body_base64 !== undefined) return el('span', { class: 'muted' }, 'binary, base64 ' + j.body_base64.slice(0, 40));
    const b = j.body || '';
    return b.length > 80 ? b.slice(0, 80) + '…' : b;
  }

  const badge = (state) => el('span', { class: 'badge ' + state, title: MEANING[state] }, state);

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

  // ---- overview: every topic at a glance, and the instances ----

  // OVERVIEW_RATES bounds the topics whose recent rates the overview
  // reads (one history call each per refresh); the counts cover all.
  const OVERVIEW_RATES = 50;
  // RATE_WINDOW is the span the overview's rates and lateness cover.
  const RATE_WINDOW = 300;

  async function showTopics(gen) {
    crumbs(el('a', { href: '#/' }, 'Overview'));
    const table = el('table', { id: 'topics' });
    const instances = el('section', { id: 'instances' });
    const updated = el('span', { class: 'muted', id: 'updated' });
    const note = el('p', { class: 'muted', id: 'overview-note' });
    const auto = el('input', { type: 'checkbox', id: 'auto', checked: true });
    auto.addEventListener('change', () => (auto.checked ? tick() : stopRefresh()));
    setView(
      el('div', { class: 'bar' },
        el('h1', null, 'Overview'),
        el('label', null, auto, ` auto-refresh every ${REFRESH_MS / 1000} s `), updated),
      table, note, instances);
    const tick = async () => {
      stopRefresh();
      try {
        const [data, cluster] = await Promise.all([call('topics'), call('cluster').catch(() => null)]);
        const topics = data.topics || [];
        const recent = await recentFigures(topics.slice(0, OVERVIEW_RATES));
        if (gen !== generation) return;
        renderTopics(table, topics, recent);
        note.textContent = `Rates, failed attempts and fire lateness cover the last ${RATE_WINDOW / 60} minutes` +
          (topics.length > OVERVIEW_RATES ? `, shown for the first ${OVERVIEW_RATES} topics (open a topic for the rest).` : '.') +
          ' Buried jobs have failed and wait for a retry or a delete.';
        renderInstances(instances, cluster);
        $('error').hidden = true;
        updated.textContent = 'updated ' + fmtTime(Date.now());
      } catch (e) {
        if (gen === generation) showError(e);
      }
      if (gen === generation && auto.checked) refreshTimer = setTimeout(tick, REFRESH_MS);
    };
    await tick();
  }

  // recentFigures reads each topic's last RATE_WINDOW of history: fires,
  // finishes and failed attempts per second, and the worst p99 fire
  // lateness. A topic without history (none kept, not sampled, not
  // allowed) has none.
  async function recentFigures(topics) {
    const out = {};
    await Promise.all(topics.map(async (t) => {
      let h = null;
      try { h = await send('history', { topic: t.name }, undefined, { range: RATE_WINDOW + 's' }); } catch { return; }
      const since = Date.now() / 1000 - RATE_WINDOW;
      const ss = ((h && h.samples) || []).filter((x) => Date.parse(x.at) / 1000 >= since - (h.interval || 0));
      if (!h || !h.sampled) return;
      const secs = Math.max(h.interval || 1, ss.length * (h.interval || 1));
      const sum = (k) => ss.reduce((n, x) => n + (x[k] || 0), 0);
      const late = ss.filter((x) => x.lateness).map((x) => x.lateness.p99);
      out[t.name] = {
        fires: sum('fires') / secs, finishes: sum('finishes') / secs, failures: sum('failures'),
        p99: late.length ? Math.max(...late) : null,
      };
    }));
    return out;
  }

  // fmtRate writes a per-second rate short: 0, 0.05/s, 12/s.
  const fmtRate = (r) => (r === undefined ? '–' : r === 0 ? '0' : (r >= 10 ? Math.round(r) : r >= 1 ? r.toFixed(1) : r.toPrecision(2)) + '/s');
  const fmtLate = (s) => (s === null || s === undefined ? '–' : s < 1 ? Math.round(s * 1000) + ' ms' : s.toFixed(1) + ' s');

  function renderTopics(table, topics, recent) {
    const head = el('tr', null, el('th', null, 'Topic'),
      STATES.map((s) => el('th', { class: 'num', title: MEANING[s] }, s)),
      el('th', { class: 'num' }, 'oldest ready'),
      el('th', { class: 'num' }, 'fires'), el('th', { class: 'num' }, 'finishes'),
      el('th', { class: 'num', title: 'attempts that ended without a finish: released, TTR expired or buried' }, 'failed attempts'),
      el('th', { class: 'num' }, 'lateness p99'), el('th', null, 'paused'));
    const rows = topics.map((t) => {
      const r = recent[t.name] || {};
      return el('tr', { 'data-topic': t.name },
        el('td', null, el('a', { href: topicHref(t.name), class: 'topic-link' }, t.name)),
        STATES.map((s) => el('td', { class: 'num' + (s === 'buried' && t[s] ? ' warn' : '') },
          t[s] ? el('a', { href: topicHref(t.name, { state: s }) }, t[s]) : '0')),
        el('td', { class: 'num' }, t.ready ? fmtDuration(t.oldest_ready_age) : '–'),
        el('td', { class: 'num', 'data-col': 'fires' }, fmtRate(r.fires)),
        el('td', { class: 'num', 'data-col': 'finishes' }, fmtRate(r.finishes)),
        el('td', { class: 'num' + (r.failures ? ' warn' : ''), 'data-col': 'failures' }, r.failures === undefined ? '–' : String(r.failures)),
        el('td', { class: 'num', 'data-col': 'lateness' }, fmtLate(r.p99)),
        el('td', null, t.paused ? 'paused' : ''));
    });
    if (!rows.length) {
      rows.push(el('tr', null, el('td', { colspan: 11, class: 'muted' }, 'No topics yet: a topic appears when a job is put in it.')));
    }
    table.replaceChildren(el('thead', null, head), el('tbody', null, rows));
  }

  // bucketRanges writes timer buckets as runs: 0-127, 256-300.
  function bucketRanges(bs) {
    const runs = [];
    for (const b of [...bs].sort((x, y) => x - y)) {
      const last = runs[runs.length - 1];
      if (last && b === last[1] + 1) last[1] = b; else runs.push([b, b]);
    }
    return runs.map(([a, b]) => (a === b ? String(a) : `${a}-${b}`)).join(', ');
  }

  // renderInstances lists the live instances (API.cluster) with the
  // timer buckets each holds: over Redis, several; on the embedded store,
  // this one.
  function renderInstances(box, cluster) {
    if (!cluster) { box.replaceChildren(); return; }
    const list = cluster.instances || [];
    const head = el('tr', null, ['Instance', 'Protocols', 'Timer buckets', 'Since'].map((h) => el('th', null, h)));
    const rows = list.map((i) => el('tr', { 'data-instance': i.url },
      el('td', null, el('code', null, i.url)),
      el('td', null, (i.protocols || []).join(', ')),
      el('td', { class: 'buckets' }, i.buckets && i.buckets.length
        ? [el('b', null, String(i.buckets.length)), ' ', el('span', { class: 'muted' }, '(' + bucketRanges(i.buckets) + ')')]
        : el('span', { class: 'muted' }, list.length > 1 ? 'none' : 'all (embedded store)')),
      el('td', null, i.since ? fmtWhen(i.since) : '')));
    box.replaceChildren(el('h2', null, 'Instances ', el('span', { class: 'muted' }, `(${list.length})`)),
      el('table', { id: 'cluster' }, el('thead', null, head), el('tbody', null, rows)));
  }

  // ---- one topic's jobs ----

  async function showTopic(gen, name, q) {
    const state = q.get('state') || '';
    const cursor = q.get('cursor') || '';
    const limit = q.get('limit') || '';
    crumbs(el('a', { href: '#/' }, 'Overview'), el('a', { href: topicHref(name) }, name));
    const [t, page, policy] = await Promise.all([
      call('topic', { topic: name }),
      call('jobs', { topic: name }, undefined, { state, cursor, limit: limit || PAGE_SIZE }),
      // A topic without a policy answers 404: show the empty form.
      call('policy', { topic: name }).catch((e) => { if (e.status === 404) return null; throw e; }),
    ]);
    if (gen !== generation) return;
    const keep = limit ? { limit } : {};
    const tab = (s) => el('a', {
      href: topicHref(name, s ? { state: s, ...keep } : keep),
      class: (s === state ? 'current' : '') + (ended(s) ? ' ended' : '') || undefined,
      'data-state': s || 'all', title: s ? MEANING[s] : 'every live job',
    }, s || 'all', ended(s) ? '' : s ? ` (${t[s]})` : ` (${STATES.reduce((n, x) => n + t[x], 0)})`);
    const tabs = el('nav', { class: 'tabs', id: 'states' },
      ['', ...STATES].map(tab), el('span', { class: 'muted tabs-sep' }, 'ended:'), ENDED.map(tab));
    const table = jobsTable(page.jobs || [], ended(state));
    setView(
      el('div', { class: 'bar' }, el('h1', null, 'Topic ', el('code', null, name)),
        t.paused ? el('span', { class: 'badge buried' }, 'paused') : null,
        el('button', { type: 'button', onclick: () => route() }, 'Refresh')),
      tabs, retryControl(name, t.buried), fireControl(name, t.delayed),
      guard(pauseControl(name, t.paused), t.paused ? 'resumeTopic' : 'pauseTopic', name),
      state && !ended(state) ? guard(purgeControl(name, state, t[state]), 'purgeJobs', name) : null,
      ended(state) ? el('p', { class: 'muted', id: 'ended-note' }, endedNote(state, t.buried)) : null,
      ended(state) ? null : bulkControl(name, table),
      table,
      pager(name, state, limit, cursor, page.next),
      guard(policyControl(name, policy), 'putPolicy', name),
      // The charts (charts.js) refresh themselves while this view lasts.
      window.DelayqCharts.mount(name, { call, el, fmtTime, alive: () => gen === generation }));
  }

  // endedNote says what an ended tab lists, in docs/states.md's words.
  function endedNote(state, buried) {
    if (state === 'finished') return 'Jobs their consumer finished, most recent last, kept for the server\'s --retain.';
    if (state === 'deleted') return 'Jobs deleted while not buried, without a finish, most recent last, kept for the server\'s --retain.';
    return `Failed jobs that were deleted without a retry, most recent last, kept for the server's --retain. ` +
      `Failed jobs still waiting for a retry or a delete are buried (${buried} now).`;
  }

  // retryControl retries the topic's failed jobs: a kick of its buried
  // jobs only (the API's default). It fires no delayed job.
  function retryControl(name, buried) {
    const n = el('input', { type: 'number', min: 1, max: 4294967295, value: Math.max(1, buried), id: 'kick-n', 'aria-label': 'buried jobs to retry' });
    const form = el('form', { class: 'inline', id: 'kick-topic' },
      'Retry up to ', n, ' buried (failed) jobs ', el('button', { type: 'submit', id: 'kick-submit' }, 'Retry'),
      el('span', { class: 'muted' }, buried ? ` (${buried} buried: they become ready)` : ' (nothing is buried)'));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      act(async () => {
        const r = await call('kickTopic', { topic: name }, { n: Number(n.value) });
        return `Retried ${r.kicked} buried job(s) of ${name}: they are ready.`;
      });
    });
    if (!buried) {
      for (const c of form.querySelectorAll('button, input')) { c.disabled = true; c.title = 'No buried job to retry'; }
      return guard(form, 'kickTopic', name);
    }
    return guard(form, 'kickTopic', name);
  }

  // fireControl makes delayed jobs due now, before their time: a kick of
  // state delayed, separate from the retry and confirmed with the count.
  function fireControl(name, delayed) {
    if (!delayed) return null;
    const n = el('input', { type: 'number', min: 1, max: delayed, value: delayed, id: 'fire-n', 'aria-label': 'delayed jobs to fire early' });
    const form = el('form', { class: 'inline', id: 'fire-delayed' },
      'Fire ', n, ` of the ${delayed} delayed jobs now, before their due time `,
      el('button', { type: 'submit', class: 'danger', id: 'fire-submit' }, 'Fire early…'));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const k = Number(n.value);
      if (!confirm(`Fire ${k} delayed job(s) of ${name} now, before their due time? Their consumers run them at once.`)) return;
      act(async () => {
        const r = await call('kickTopic', { topic: name }, { n: k, state: 'delayed' });
        return `Fired ${r.kicked} delayed job(s) of ${name} early: they are ready.`;
      });
    });
    return guard(form, 'kickTopic', name);
  }

  // bulkControl acts on the jobs ticked in table: retry the buried ones
  // (a kick of each) or delete them all, after a confirmation.
  function bulkControl(name, table) {
    const picked = () => [...table.querySelectorAll('input.pick:checked')].map((c) => ({ id: c.value, state: c.getAttribute('data-state') }));
    const retry = el('button', { type: 'button', id: 'bulk-retry', disabled: true }, 'Retry selected');
    const del = el('button', { type: 'button', id: 'bulk-delete', class: 'danger', disabled: true }, 'Delete selected…');
    const count = el('span', { class: 'muted', id: 'bulk-count' }, 'Tick jobs to act on several at once.');
    const whyRetry = denied('kickJob', name), whyDelete = denied('deleteJob', name);
    const refresh = () => {
      const p = picked(), b = p.filter((j) => j.state === 'buried').length;
      count.textContent = p.length ? `${p.length} selected (${b} buried)` : 'Tick jobs to act on several at once.';
      retry.textContent = b ? `Retry ${b} buried` : 'Retry selected';
      retry.disabled = !b || !!whyRetry;
      retry.title = whyRetry ? 'Your token ' + whyRetry : b ? '' : 'Only buried (failed) jobs can be retried';
      del.textContent = p.length ? `Delete ${p.length}…` : 'Delete selected…';
      del.disabled = !p.length || !!whyDelete;
      del.title = whyDelete ? 'Your token ' + whyDelete : '';
    };
    table.addEventListener('change', (ev) => {
      if (ev.target.id === 'pick-all') for (const c of table.querySelectorAll('input.pick')) c.checked = ev.target.checked;
      refresh();
    });
    const each = async (jobs, fn, verb) => {
      const failed = [];
      for (const j of jobs) {
        try { await fn(j); } catch (e) { if (e.status === 401) throw e; failed.push(`${j.id}: ${e.message}`); }
      }
      const msg = `${verb} ${jobs.length - failed.length} of ${jobs.length} job(s) of ${name}.`;
      if (failed.length) {
        pendingNotice = msg;
        await route();
        showError(new Error('Not done: ' + failed.join('; ')));
        return null;
      }
      return msg;
    };
    retry.addEventListener('click', () => act(() => each(picked().filter((j) => j.state === 'buried'),
      (j) => call('kickJob', { id: j.id }), 'Retried')));
    del.addEventListener('click', () => {
      const p = picked();
      if (!confirm(`Delete ${p.length} job(s) of ${name} (${p.map((j) => j.id).join(', ')})? This cannot be undone.`)) return;
      act(() => each(p, (j) => call('deleteJob', { id: j.id }), 'Deleted'));
    });
    refresh();
    return el('div', { class: 'actions', id: 'bulk' }, retry, del, count);
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
    // Live jobs get a tick box each (bulkControl), inside the ID cell so
    // the columns stay as they are.
    const pick = (j) => (isEnded ? null : el('input', { type: 'checkbox', class: 'pick', value: j.id, 'data-state': j.state, 'aria-label': 'select ' + j.id }));
    const head = el('tr', null, ['ID', 'Seq', 'State', 'Priority', 'Attempts', isEnded ? 'Ended' : 'Due', 'Last failure', 'Body']
      .map((h) => el('th', { class: ['Seq', 'Priority', 'Attempts'].includes(h) ? 'num' : undefined },
        h === 'ID' && !isEnded && jobs.length ? el('input', { type: 'checkbox', id: 'pick-all', 'aria-label': 'select all' }) : null, h)));
    const rows = jobs.map((j) => el('tr', { 'data-job': j.id },
      el('td', null, pick(j), el('a', { href: jobHref(j.id), class: 'job-link' }, j.id)),
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
    crumbs(el('a', { href: '#/' }, 'Overview'), el('span', null, 'job ' + id));
    const j = await call('job', { id });
    if (gen !== generation) return;
    crumbs(el('a', { href: '#/' }, 'Overview'), el('a', { href: topicHref(j.topic) }, j.topic), el('span', null, j.id));
    const fields = [
      ['id', el('code', null, j.id)],
      ['seq', j.seq],
      ['topic', el('a', { href: topicHref(j.topic) }, j.topic)],
      ['state', badge(j.state)],
      ['meaning', el('span', { class: 'muted' }, MEANING[j.state] || '')],
      ['priority', j.priority + ' (lower runs first)'],
      ['ttr', j.ttr + ' s'],
      ['attempts', j.attempts + ' of ' + (j.max_attempts || 'unlimited')],
      // Each count is its attempts by outcome (docs/states.md), so they
      // add up with the attempts table below; kicks are retries.
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
    const button = (label, idAttr, api, fn) => buttons.push(guard(el('button', { type: 'button', id: idAttr, onclick: () => act(fn) }, label), api, j.topic));
    if (j.state === 'buried') button('Retry (kick)', 'kick', 'kickJob', async () => { await call('kickJob', { id }); return `Retried job ${id}: it is ready.`; });
    if (j.state === 'delayed') button('Run now', 'run-now', 'updateJob', async () => { await call('updateJob', { id }, { delay: 0 }); return `Job ${id} is due now.`; });
    buttons.push(guard(el('button', { type: 'button', id: 'delete', class: 'danger', onclick: () => deleteJob(j) }, 'Delete'), 'deleteJob', j.topic));
    return el('div', { class: 'actions' }, buttons,
      j.state === 'reserved' ? el('span', { class: 'muted' }, ' Reserved by a consumer: deleting it makes that consumer\'s finish fail.') : null,
      j.state !== 'reserved' ? guard(rescheduleForm(id), 'updateJob', j.topic) : null);
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

  // field is a labelled input of a form; its id names it.
  const field = (id, label, value, attrs) => el('label', null, label + ' ',
    el('input', { id, name: id, value: value === undefined || value === null ? '' : String(value), 'aria-label': label, ...(attrs || {}) }));
  const val = (id) => $(id).value.trim();

  async function showSchedules(gen) {
    crumbs(el('a', { href: '#/' }, 'Overview'), el('a', { href: '#/schedules' }, 'Schedules'));
    const data = await call('schedules');
    if (gen !== generation) return;
    const why = denied('putSchedule');
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
      guard(el('td', { class: 'sched-actions' },
        el('button', { type: 'button', class: 'edit', onclick: () => fillSchedule(s) }, 'Edit'),
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
        } }, 'Delete')), 'putSchedule')));
    if (!rows.length) {
      rows.push(el('tr', null, el('td', { colspan: 8, class: 'muted' },
        why ? 'No schedules.' : 'No schedules: create one below.')));
    }
    setView(
      el('div', { class: 'bar' }, el('h1', null, 'Schedules'),
        el('button', { type: 'button', onclick: () => route() }, 'Refresh')),
      el('table', { id: 'schedules' }, el('thead', null, head), el('tbody', null, rows)),
      guard(scheduleForm(), 'putSchedule'));
  }

  // scheduleForm creates a schedule, or replaces the one of the same name
  // (Edit fills it in). Empty fields are left out; the server names what
  // it refuses.
  function scheduleForm() {
    const form = el('form', { id: 'schedule-form', class: 'policy' },
      el('h2', { id: 'schedule-form-title' }, 'New schedule'),
      field('sched-name', 'name', '', { required: true, size: 16 }),
      field('sched-topic', 'topic', '', { required: true, size: 16 }),
      field('sched-cron', 'cron', '', { size: 16, placeholder: '0 30 2 * * *' }),
      field('sched-every', 'or every', '', { size: 6, placeholder: '1h' }),
      field('sched-timezone', 'time zone', '', { size: 14, placeholder: 'UTC' }),
      field('sched-body', 'body', '', { size: 24 }),
      el('div', { class: 'actions' }, el('button', { type: 'submit', id: 'schedule-save' }, 'Save schedule'),
        el('span', { class: 'muted' }, ' A cron spec (seconds optional, @hourly…) or a fixed interval (30s, 1h).')));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const name = val('sched-name');
      const body = { topic: val('sched-topic') };
      if (val('sched-cron')) body.cron = val('sched-cron');
      if (val('sched-every')) body.every = val('sched-every');
      if (val('sched-timezone')) body.timezone = val('sched-timezone');
      if ($('sched-body').value !== '') body.body = $('sched-body').value;
      act(async () => {
        await call('putSchedule', { name }, body);
        return `Saved schedule ${name}.`;
      });
    });
    return form;
  }

  // fillSchedule puts schedule s into the form to edit it.
  function fillSchedule(s) {
    const every = /^@every (.+)$/.exec(s.cron);
    $('sched-name').value = s.name;
    $('sched-topic').value = s.topic;
    $('sched-cron').value = every ? '' : s.cron;
    $('sched-every').value = every ? every[1] : '';
    $('sched-timezone').value = s.timezone;
    $('sched-body').value = s.body || '';
    $('schedule-form-title').textContent = `Edit schedule ${s.name}`;
    $('sched-topic').focus();
  }

  // ---- alarms ----

  const CONDITIONS = ['buried_over', 'oldest_ready_over', 'lateness_p99_over', 'failures_per_min_over'];

  // whenText lists an alarm's conditions as "buried_over 3, oldest_ready_over 5m0s".
  function whenText(w) {
    return CONDITIONS
      .filter((k) => w && w[k] !== undefined && w[k] !== null)
      .map((k) => `${k} ${w[k]}`).join(', ');
  }

  // num writes a condition's value: whole numbers as they are, others
  // (seconds, rates) to two decimals.
  const num = (v) => (Number.isInteger(v) ? String(v) : v.toFixed(2));

  async function showAlarms(gen) {
    crumbs(el('a', { href: '#/' }, 'Overview'), el('a', { href: '#/alarms' }, 'Alarms'));
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
        guard(el('td', { class: 'sched-actions' },
          el('button', { type: 'button', class: 'edit', onclick: () => fillAlarm(a) }, 'Edit'),
          el('button', { type: 'button', class: 'danger delete', onclick: () => {
            if (!confirm(`Delete alarm ${a.name}? A firing alarm sends no resolved event.`)) return;
            act(async () => {
              await call('deleteAlarm', { name: a.name });
              return `Deleted alarm ${a.name}.`;
            });
          } }, 'Delete')), 'putAlarm'));
    });
    if (!rows.length) {
      rows.push(el('tr', null, el('td', { colspan: 8, class: 'muted' }, 'No alarms.')));
    }
    setView(
      el('div', { class: 'bar' }, el('h1', null, 'Alarms'),
        el('button', { type: 'button', onclick: () => route() }, 'Refresh')),
      el('table', { id: 'alarms' }, el('thead', null, head), el('tbody', null, rows)),
      guard(alarmForm(), 'putAlarm'));
  }

  // editing is the alarm the form edits: its secret, headers and format,
  // which the form does not show, go back as they were (a PUT of the
  // masked secret keeps the stored one).
  let editing = null;

  // alarmForm creates an alarm, or replaces the one of the same name.
  function alarmForm() {
    editing = null;
    const form = el('form', { id: 'alarm-form', class: 'policy' },
      el('h2', { id: 'alarm-form-title' }, 'New alarm'),
      field('alarm-name', 'name', '', { required: true, size: 16 }),
      field('alarm-url', 'webhook URL', '', { required: true, size: 30 }),
      field('alarm-topics', 'topics', '', { size: 16, placeholder: 'shop/*, mail (empty: all)' }),
      field('alarm-buried_over', 'buried over', '', { size: 5 }),
      field('alarm-oldest_ready_over', 'oldest ready over', '', { size: 6, placeholder: '5m' }),
      field('alarm-lateness_p99_over', 'lateness p99 over', '', { size: 6, placeholder: '1s' }),
      field('alarm-failures_per_min_over', 'failed attempts/min over', '', { size: 5 }),
      field('alarm-repeat', 'repeat', '', { size: 6, placeholder: '10m' }),
      el('div', { class: 'actions' }, el('button', { type: 'submit', id: 'alarm-save' }, 'Save alarm'),
        el('span', { class: 'muted' }, ' Set at least one condition.')));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const name = val('alarm-name');
      const number = (x) => (x !== '' && !Number.isNaN(Number(x)) ? Number(x) : x);
      const body = { url: val('alarm-url'), when: {} };
      const topics = val('alarm-topics').split(',').map((x) => x.trim()).filter(Boolean);
      if (topics.length) body.topics = topics;
      for (const k of CONDITIONS) {
        const v = val('alarm-' + k);
        if (v !== '') body.when[k] = k === 'buried_over' || k === 'failures_per_min_over' ? number(v) : v;
      }
      if (val('alarm-repeat')) body.repeat = val('alarm-repeat');
      if (editing && editing.name === name) {
        if (editing.secret) body.secret = editing.secret;
        if (editing.headers) body.headers = editing.headers;
        if (editing.format) body.format = editing.format;
      }
      act(async () => {
        await call('putAlarm', { name }, body);
        return `Saved alarm ${name}.`;
      });
    });
    return form;
  }

  // fillAlarm puts alarm a into the form to edit it.
  function fillAlarm(a) {
    editing = a;
    $('alarm-name').value = a.name;
    $('alarm-url').value = a.url;
    $('alarm-topics').value = (a.topics || []).join(', ');
    for (const k of CONDITIONS) $('alarm-' + k).value = a.when && a.when[k] !== undefined && a.when[k] !== null ? String(a.when[k]) : '';
    $('alarm-repeat').value = a.repeat || '';
    $('alarm-form-title').textContent = `Edit alarm ${a.name}`;
    $('alarm-url').focus();
  }

  // ---- not found ----

  function showNotFound(path) {
    crumbs(el('a', { href: '#/' }, 'Overview'));
    setView(el('section', { id: 'not-found' },
      el('h1', null, 'Page not found'),
      el('p', null, 'The dashboard has no page at ', el('code', null, '#' + path), '. ',
        el('a', { href: '#/' }, 'Go to the overview'), '.')));
  }

  // ---- login ----

  // showUser shows who is signed in, with the logout button, when the
  // server has tokens (a server without them needs no login).
  function showUser(who) {
    session = who || { auth: false };
    $('user').hidden = !session.auth;
    $('user-name').textContent = session.auth ? session.name : '';
    $('user-scopes').textContent = session.auth ? `(${(session.scopes || []).join(', ')} on ${(session.topics || []).join(', ')})` : '';
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
      if (path === '/') {
        await showTopics(gen);
      } else if (parts[1] === 'topic' && parts[2]) {
        await showTopic(gen, decodeURIComponent(parts.slice(2).join('/')), new URLSearchParams(qs || ''));
      } else if (path === '/schedules') {
        await showSchedules(gen);
      } else if (path === '/alarms') {
        await showAlarms(gen);
      } else if (parts[1] === 'job' && parts[2] && parts.length === 3) {
        await showJob(gen, decodeURIComponent(parts[2]));
      } else {
        showNotFound(path);
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
