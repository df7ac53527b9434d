// delayq dashboard charts: a topic's history (jobs by state, fires,
// finishes, failures, fire lateness) and due times, drawn by uPlot
// (vendor/uplot, vendored from the npm registry; nothing to build). app.js
// mounts them on a topic's page with its own API caller; this file names
// no endpoint itself. Data reaches the DOM only as text nodes and
// attribute values; uPlot draws on canvases.
'use strict';

window.DelayqCharts = (() => {
  const STATES = ['ready', 'delayed', 'reserved', 'buried'];
  const PERCENTILES = ['p50', 'p90', 'p99'];
  const DUE_WITHIN = [['1m', 'next minute'], ['1h', 'next hour'], ['24h', 'next day']];
  // RANGES are the spans a chart can show; those longer than the history
  // the server keeps (its answer's resolutions: 10 s buckets for a day,
  // one-minute buckets for a week) are not offered. The server picks the
  // bucket size for the range asked.
  const RANGES = [[900, '15 min'], [3600, '1 hour'], [21600, '6 hours'], [86400, '24 hours'], [604800, '7 days']];
  const REFRESH_MS = 3000;
  const HEIGHT = 170;

  // range is the span shown, in seconds; it outlives a page change, so a
  // chosen range stays while the operator moves between topics.
  let range = 3600;

  // fmtNum writes counts and rates short: 12, 3.4, 0.05, 1.2k, 3.4M.
  function fmtNum(n) {
    const a = Math.abs(n);
    if (a >= 1e6) return (n / 1e6).toFixed(1).replace(/\.0$/, '') + 'M';
    if (a >= 1e4) return Math.round(n / 1e3) + 'k';
    if (a >= 1e3) return (n / 1e3).toFixed(1).replace(/\.0$/, '') + 'k';
    if (Number.isInteger(n)) return String(n);
    return a >= 10 ? n.toFixed(0) : a >= 1 ? n.toFixed(1) : n.toPrecision(2);
  }

  // fmtSeconds writes a lateness: 0 ms, 40 µs, 12 ms, 1.5 s, 2.0 min.
  function fmtSeconds(s) {
    if (s <= 0) return '0 ms';
    if (s < 0.001) return Math.round(s * 1e6) + ' µs';
    if (s < 1) return (s * 1000).toPrecision(3).replace(/\.?0+$/, '') + ' ms';
    if (s < 120) return s.toPrecision(3).replace(/\.?0+$/, '') + ' s';
    return (s / 60).toFixed(1) + ' min';
  }

  // fmtSpan writes a span of seconds as the range buttons do.
  function fmtSpan(s) {
    const known = RANGES.find(([r]) => r === s);
    if (known) return known[1];
    if (s % 86400 === 0) return `${s / 86400} day${s === 86400 ? '' : 's'}`;
    if (s % 3600 === 0) return `${s / 3600} hour${s === 3600 ? '' : 's'}`;
    return `${Math.round(s / 60)} min`;
  }

  // fmtStep writes a bucket size: 10 s, 1 min.
  const fmtStep = (s) => (s % 60 === 0 ? `${s / 60} min` : `${s} s`);

  // kept is the longest history the server keeps: its coarsest
  // resolution's keep (or span, from a server that names none).
  const kept = (hist) => Math.max(hist.span, ...(hist.resolutions || []).map((r) => r.keep));

  // clock writes a chart's moment as app.js's fmtTime does (UTC, with
  // the zone), and the axes are drawn in UTC too: one time format.
  const clock = (sec) => new Date(sec * 1000).toISOString().slice(0, 19).replace('T', ' ') + ' UTC';
  const utc = (sec) => window.uPlot.tzDate(new Date(sec * 1000), 'Etc/UTC');

  // MIN_WINDOW is the narrowest window a chart shows, in buckets: a
  // history younger than the range is drawn over its own span (at least
  // this many buckets) instead of as a spike at the right edge.
  const MIN_WINDOW = 30;

  // niceMax rounds a maximum up to 1, 2 or 5 times a power of ten.
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  // colour reads a theme colour of style.css (canvases cannot use CSS
  // variables), so the charts follow the light and the dark theme.
  function colour(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
  }
  const COLOURS = {
    ready: '--ok', delayed: '--accent', reserved: '--amber', buried: '--warn',
    fires: '--accent', finishes: '--ok', failures: '--warn', p50: '--ok', p90: '--amber', p99: '--warn', due: '--accent',
  };
  const col = (k) => colour(COLOURS[k]);

  // el is app.js's HTML builder, handed over at mount.
  let el = null;

  // tooltip is a uPlot plugin: a box by the cursor with the hovered
  // sample's time (or bucket) and every series' value, as text.
  function tooltip(fmtX) {
    let tip = null;
    return {
      hooks: {
        init: (u) => {
          tip = el('div', { class: 'u-tooltip', role: 'tooltip' });
          tip.hidden = true;
          u.over.append(tip);
          u.over.addEventListener('mouseleave', () => { tip.hidden = true; });
        },
        setCursor: (u) => {
          const i = u.cursor.idx;
          if (i === null || i === undefined || u.cursor.left < 0) {
            tip.hidden = true;
            return;
          }
          const rows = [el('div', { class: 'tt-x' }, fmtX(u.data[0][i]))];
          u.series.forEach((s, k) => {
            if (k === 0) return;
            const v = u.data[k][i];
            rows.push(el('div', { 'data-series': s.label },
              el('span', { class: 'swatch', 'data-colour': s.label }), s.label + ' ',
              el('b', null, v === null || v === undefined ? '–' : s.fmt(v))));
          });
          tip.replaceChildren(...rows);
          tip.hidden = false;
          const w = tip.offsetWidth, h = tip.offsetHeight;
          const left = u.cursor.left + 14 + w > u.over.clientWidth ? u.cursor.left - 14 - w : u.cursor.left + 14;
          tip.style.left = Math.max(0, left) + 'px';
          tip.style.top = Math.max(0, Math.min(u.cursor.top - h / 2, u.over.clientHeight - h)) + 'px';
          for (const sw of tip.querySelectorAll('.swatch')) {
            const s = u.series.find((x) => x.label === sw.getAttribute('data-colour'));
            sw.style.background = s ? s.swatch : '';
          }
        },
      },
    };
  }

  // plot makes one uPlot chart in box: series are [key, label, fmt,
  // kind] ("line", "area" or "bars"); xs are seconds, or bucket indexes
  // when labels is given.
  function plot(box, title, series, fmt, opts) {
    const width = Math.max(260, Math.floor(box.getBoundingClientRect().width) || 420);
    const isTime = !opts.labels;
    const u = new window.uPlot({
      width, height: HEIGHT, tzDate: utc,
      legend: { show: false },
      cursor: { drag: { x: false, y: false }, points: { size: 6 } },
      scales: {
        x: isTime
          ? { time: true, range: () => opts.xRange() }
          : { time: false, range: () => [-0.5, opts.labels.length - 0.5] },
        y: { range: (u, min, max) => [0, niceMax(Math.max(max || 0, opts.yMin || 0))] },
      },
      axes: [
        isTime
          ? { stroke: colour('--muted'), grid: { stroke: colour('--line'), width: 1 }, label: 'UTC', labelSize: 14, labelFont: '11px system-ui' }
          : { stroke: colour('--muted'), grid: { show: false }, splits: () => opts.labels.map((_, i) => i), values: (u, splits) => splits.map((i) => opts.labels[i] || '') },
        { stroke: colour('--muted'), grid: { stroke: colour('--line'), width: 1 }, size: 56, values: (u, splits) => splits.map(fmt) },
      ],
      series: [{}].concat(series.map(([key, label, f, kind]) => {
        const c = col(key);
        const s = { label, stroke: c, width: 1.6, fmt: f, swatch: c, spanGaps: false, points: { show: kind === 'line' } };
        if (kind === 'area') s.fill = c + '33';
        if (kind === 'bars') {
          s.fill = c + 'cc';
          s.paths = window.uPlot.paths.bars({ size: [isTime ? 0.9 : 0.6, 60] });
          s.points = { show: false };
        }
        return s;
      })),
      plugins: [tooltip(isTime ? clock : (i) => title + ' ' + (opts.labels[i] || ''))],
    }, opts.data, box);
    u.root.setAttribute('aria-label', title);
    return u;
  }

  function legend(items) {
    return el('ul', { class: 'legend' }, items.map(([key, label, value]) =>
      el('li', { 'data-series': key, 'data-value': value }, el('span', { class: 'swatch ' + key }), label + ' ', el('b', null, value))));
  }

  function card(id, title) {
    const box = el('div', { class: 'plot' });
    const below = el('div', { class: 'below' });
    return { fig: el('figure', { class: 'chart-card', id }, el('figcaption', null, title), box, below), box, below };
  }

  // Charts is the live charts section of one topic page.
  class Charts {
    constructor(topic, deps) {
      this.topic = topic;
      this.deps = deps;
      this.plots = {};
      this.cards = null; // built at the first history with samples
      this.status = el('p', { class: 'muted', id: 'charts-status' });
      this.picker = el('div', { class: 'range', id: 'chart-range', role: 'group', 'aria-label': 'range' });
      this.grid = el('div', { class: 'charts' });
      this.box = el('section', { id: 'charts', 'aria-live': 'off' },
        el('div', { class: 'bar' }, el('h2', null, 'History'), this.picker), this.status, this.grid);
      this.hist = null;
      this.due = null;
    }

    // offered lists the ranges the server's history covers; the shortest
    // is always offered, and shows all of a shorter history.
    offered(span) {
      const fit = RANGES.filter(([r]) => r <= span + 1);
      return fit.length ? fit : RANGES.slice(0, 1);
    }

    drawPicker(hist) {
      const span = kept(hist);
      const offered = this.offered(span);
      if (!offered.some(([r]) => r === range)) range = offered.length ? offered[offered.length - 1][0] : RANGES[0][0];
      this.box.setAttribute('data-range', range);
      this.box.setAttribute('data-span', hist.span); // the range of the data drawn (range once its answer came)
      this.picker.replaceChildren(...RANGES.map(([r, label]) => {
        const ok = offered.some(([x]) => x === r);
        return el('button', {
          type: 'button', 'data-range': r, 'aria-pressed': String(r === range), class: r === range ? 'current' : undefined,
          disabled: !ok, title: ok ? `Show the last ${label}` : `This server keeps only the last ${fmtSpan(span)} of history`,
          onclick: () => { range = r; this.render(); if (this.reload) this.reload(); },
        }, label);
      }));
    }

    // render draws the latest answers at the chosen range.
    render() {
      const hist = this.hist, due = this.due;
      const parts = [];
      if (!hist) {
        this.picker.replaceChildren();
        this.status.textContent = 'This server keeps no history: only the due-time distribution is shown.';
      } else {
        this.drawPicker(hist);
        const res = hist.resolutions || [{ step: hist.interval, keep: hist.span }];
        const shown = `The last ${fmtSpan(hist.span)} in ${fmtStep(hist.interval)} buckets`;
        const keeps = `the store keeps ${res.map((r) => `${fmtStep(r.step)} buckets for ${fmtSpan(r.keep)}`).join(' and ')}, for every instance together`;
        const longer = this.offered(kept(hist)).length < RANGES.length ? '; longer ranges are not offered' : '';
        if (!hist.sampled || !hist.samples.length) {
          this.status.textContent = (hist.sampled_topics >= hist.max_topics
            ? `Not sampled: ${hist.max_topics} other topics are (the history keeps at most that many).`
            : `No samples yet: the first is taken within ${fmtStep(res[0].step)} of the topic's first job.`) + ` The ${keeps.slice(4)}${longer}.`;
        } else {
          this.status.textContent = `${shown}; ${keeps}${longer}.`;
          parts.push('history');
        }
      }
      this.build(parts.includes('history'));
      if (parts.includes('history')) this.drawHistory(hist);
      this.drawDue(due);
    }

    // build makes the cards once, and again when history comes or goes.
    build(withHistory) {
      const want = withHistory ? 'history' : 'due';
      if (this.cards && this.cards.kind === want) return;
      for (const u of Object.values(this.plots)) u.destroy();
      this.plots = {};
      const cards = { kind: want, due: card('chart-due', 'Due in the…') };
      if (withHistory) {
        cards.states = card('chart-states', 'Jobs by state');
        cards.fires = card('chart-fires', 'Fires per second');
        cards.finishes = card('chart-finishes', 'Finishes per second');
        cards.failures = card('chart-failures', 'Failures per second');
        cards.lateness = card('chart-lateness', 'Fire lateness');
        this.grid.replaceChildren(cards.states.fig, cards.fires.fig, cards.finishes.fig, cards.failures.fig, cards.lateness.fig, cards.due.fig);
      } else {
        this.grid.replaceChildren(cards.due.fig);
      }
      this.cards = cards;
    }

    // update gives plot name its data, making it the first time.
    update(name, make, data) {
      if (this.plots[name]) {
        this.plots[name].setData(data);
      } else {
        this.plots[name] = make(data);
      }
    }

    drawHistory(hist) {
      const step = hist.interval;
      const t1 = Date.now() / 1000;
      // The window fits the data: the chosen range, or from the first
      // sample when the history is younger (a fresh server, a new topic).
      const first = Math.min(...hist.samples.map((x) => Date.parse(x.at) / 1000));
      const t0 = Math.max(t1 - range, Math.min(first - step, t1 - MIN_WINDOW * step));
      this.box.setAttribute('data-window', Math.round(t1 - t0));
      // A bucket nobody wrote (the server was down, the topic idle) is a
      // gap, not a line drawn across it: a null row after each hole.
      const samples = [];
      for (const s of hist.samples.map((x) => ({ ...x, t: Date.parse(x.at) / 1000 })).filter((x) => x.t >= t0 - step)) {
        const prev = samples[samples.length - 1];
        if (prev && s.t - prev.t > 1.5 * step) samples.push({ t: prev.t + step, gap: true });
        samples.push(s);
      }
      const val = (s, k) => (s.gap ? null : s[k]);
      const real = samples.filter((s) => !s.gap);
      const xs = samples.map((s) => s.t);
      this.xr = [t0, t1]; // read by the plots' x scale at every setData
      const xRange = () => this.xr;
      const c = this.cards;

      this.update('states', (data) => plot(c.states.box, 'Jobs by state', STATES.map((k) => [k, k, fmtNum, 'area']), fmtNum, { data, xRange }),
        [xs, ...STATES.map((k) => samples.map((s) => val(s, k)))]);
      const last = hist.samples[hist.samples.length - 1];
      c.states.below.replaceChildren(legend(STATES.map((k) => [k, k, fmtNum(last[k])])));

      // Fires, finishes and failures: a rate per bucket, the latest
      // rate and the total over the range.
      for (const [name, title, unit, total, done] of [
        ['fires', 'Fires per second', 'fires/s', 'fire-total', 'fired'],
        ['finishes', 'Finishes per second', 'finishes/s', 'finish-total', 'finished'],
        ['failures', 'Failures per second', 'failures/s', 'failure-total', 'failed attempts'],
      ]) {
        const rate = name + '_per_sec';
        this.update(name, (data) => plot(c[name].box, title, [[name, unit, (v) => fmtNum(v) + '/s', 'bars']], fmtNum, { data, xRange }),
          [xs, samples.map((s) => val(s, rate))]);
        const n = real.reduce((sum, s) => sum + (s[name] || 0), 0);
        c[name].below.replaceChildren(legend([[name, 'now', fmtNum(last[rate] || 0) + '/s'], [total, `${done} in the last ${fmtSpan(range)}`, fmtNum(n)]]));
        if (t1 - t0 < range - step) c[name].below.append(el('p', { class: 'muted note window' }, `History since ${clock(first)}: the chart shows that span.`));
      }
      c.failures.below.append(el('p', { class: 'muted note' }, 'Failed attempts: releases, buries and TTR expiries.'));

      // At least a millisecond high: stores keep times in whole ms, so a
      // quiet hour's latenesses are often all 0.
      this.update('lateness', (data) => plot(c.lateness.box, 'Fire lateness', PERCENTILES.map((p) => [p, p, fmtSeconds, 'line']), fmtSeconds, { data, xRange, yMin: 0.001 }),
        [xs, ...PERCENTILES.map((p) => samples.map((s) => (s.lateness ? s.lateness[p] : null)))]);
      const fired = real.filter((s) => s.lateness);
      const lf = fired[fired.length - 1];
      c.lateness.below.replaceChildren(legend(lf ? PERCENTILES.map((p) => [p, p, fmtSeconds(lf.lateness[p])]) : [['none', `no fires in the last ${fmtSpan(range)}`, '']]));
    }

    drawDue(due) {
      const labels = due.buckets.map((b) => (DUE_WITHIN.find(([w]) => w === b.within) || [b.within, 'within ' + b.within])[1]);
      const c = this.cards.due;
      this.update('due', (data) => plot(c.box, 'Due in the', [['due', 'delayed jobs', fmtNum, 'bars']], fmtNum, { data, labels }),
        [due.buckets.map((_, i) => i), due.buckets.map((b) => b.count)]);
      c.below.replaceChildren(
        el('ul', { class: 'legend' }, due.buckets.map((b, i) =>
          el('li', { 'data-within': b.within, 'data-count': b.count }, labels[i] + ' ', el('b', null, fmtNum(b.count))))),
        el('p', { class: 'muted note' }, 'Delayed jobs due within each span from now; each includes the shorter spans.'));
    }

    destroy() {
      for (const u of Object.values(this.plots)) u.destroy();
      this.plots = {};
    }
  }

  // mount returns the charts' section for topic and keeps it live until
  // alive() turns false (the page moved on). deps.call is app.js's API
  // caller.
  function mount(topic, deps) {
    el = deps.el;
    const charts = new Charts(topic, deps);
    charts.status.textContent = 'Loading charts…';
    // seq numbers the fetches: a range click fetches at once, and only
    // the newest fetch draws and schedules the next.
    let seq = 0, timer = null;
    const tick = async () => {
      const my = ++seq;
      clearTimeout(timer);
      if (!deps.alive()) { charts.destroy(); return; }
      try {
        const [hist, due] = await Promise.all([
          deps.call('history', { topic }, undefined, { range: range + 's' }).catch((e) => { if (e.status === 404) return null; throw e; }),
          deps.call('due', { topic }, undefined, { within: DUE_WITHIN.map(([w]) => w).join(',') }),
        ]);
        if (my !== seq) return;
        if (!deps.alive()) { charts.destroy(); return; }
        charts.hist = hist;
        charts.due = due;
        charts.render();
      } catch (e) {
        if (my !== seq) return;
        if (!deps.alive()) { charts.destroy(); return; }
        charts.status.textContent = 'Charts unavailable: ' + e.message;
      }
      timer = setTimeout(tick, REFRESH_MS);
    };
    charts.reload = tick;
    tick();
    return charts.box;
  }

  return { mount };
})();
