// delayq dashboard charts: a topic's last hour as hand-written inline SVG
// (no chart library, nothing to build). app.js mounts them on a topic's
// page with its own API caller; this file names no endpoint itself. Data
// reaches the SVG only as attribute values and text nodes.
'use strict';

window.DelayqCharts = (() => {
  const NS = 'http://www.w3.org/2000/svg';
  const STATES = ['ready', 'delayed', 'reserved', 'buried']; // stacked bottom to top
  const PERCENTILES = ['p50', 'p90', 'p99'];
  const DUE_WITHIN = [['1m', 'next minute'], ['1h', 'next hour'], ['24h', 'next day']];
  const REFRESH_MS = 3000;
  // Every chart draws in the same box; CSS scales it to the page.
  const W = 400, H = 160, PAD = { left: 46, right: 10, top: 12, bottom: 22 };
  const PW = W - PAD.left - PAD.right, PH = H - PAD.top - PAD.bottom;

  // svg builds an SVG element; children that are strings become text.
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null) e.setAttribute(k, String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c !== undefined && c !== null && c !== false) e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

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

  // niceMax rounds a maximum up to 1, 2 or 5 times a power of ten, so the
  // axis label is a round number.
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  const clock = (ms) => new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });

  // frame draws a chart's axes: y from 0 to yMax (labelled with fmt), x
  // over the time domain [t0, t1] (labelled at both ends).
  function frame(id, title, yMax, fmt, t0, t1) {
    const root = svg('svg', { id, class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title },
      svg('title', null, title));
    const x0 = PAD.left, y0 = PAD.top + PH;
    root.append(
      svg('line', { class: 'axis', x1: x0, y1: PAD.top, x2: x0, y2: y0 }),
      svg('line', { class: 'axis', x1: x0, y1: y0, x2: x0 + PW, y2: y0 }),
      svg('line', { class: 'grid', x1: x0, y1: PAD.top, x2: x0 + PW, y2: PAD.top }),
      svg('text', { class: 'tick y-max', x: x0 - 4, y: PAD.top + 4, 'text-anchor': 'end' }, fmt(yMax)),
      svg('text', { class: 'tick', x: x0 - 4, y: y0, 'text-anchor': 'end' }, fmt(0)));
    if (t1 !== undefined) {
      root.append(
        svg('text', { class: 'tick', x: x0, y: H - 6 }, clock(t0)),
        svg('text', { class: 'tick', x: x0 + PW, y: H - 6, 'text-anchor': 'end' }, clock(t1)));
    }
    return root;
  }

  // scales maps a sample's time and a value onto the plot.
  function scales(t0, t1, yMax) {
    const span = Math.max(t1 - t0, 1);
    return {
      x: (t) => +(PAD.left + ((t - t0) / span) * PW).toFixed(1),
      y: (v) => +(PAD.top + PH - (v / yMax) * PH).toFixed(1),
    };
  }

  function legend(items) {
    return el('ul', { class: 'legend' }, items.map(([cls, label, value]) =>
      el('li', { class: cls, 'data-series': cls, 'data-value': value }, el('span', { class: 'swatch ' + cls }), label + ' ', el('b', null, value))));
  }

  // el is app.js's HTML builder, handed over at mount.
  let el = null;

  // statesChart stacks the jobs by state as areas, one band per state.
  function statesChart(samples, t0, t1) {
    const totals = samples.map((s) => STATES.reduce((n, k) => n + s[k], 0));
    const yMax = niceMax(Math.max(0, ...totals));
    const root = frame('chart-states', 'Jobs by state over the last hour', yMax, fmtNum, t0, t1);
    const sc = scales(t0, t1, yMax);
    const base = samples.map(() => 0);
    for (const state of STATES) {
      const top = samples.map((s, i) => base[i] + s[state]);
      const xs = samples.map((s) => sc.x(s.t));
      const upper = xs.map((x, i) => `${x},${sc.y(top[i])}`);
      const lower = xs.map((x, i) => `${x},${sc.y(base[i])}`).reverse();
      // A single sample is a line one pixel wide rather than nothing.
      if (samples.length === 1) {
        upper.push(`${xs[0] + 1},${sc.y(top[0])}`);
        lower.unshift(`${xs[0] + 1},${sc.y(base[0])}`);
      }
      root.append(svg('polygon', { class: 'area ' + state, 'data-state': state, points: upper.concat(lower).join(' ') },
        svg('title', null, `${state}: ${samples[samples.length - 1][state]} now`)));
      top.forEach((v, i) => { base[i] = v; });
    }
    const last = samples[samples.length - 1];
    return card('Jobs by state', root, legend(STATES.map((s) => [s, s, fmtNum(last[s])])));
  }

  // firesChart draws one bar per sample: delayed jobs made ready per
  // second by this instance's timer.
  function firesChart(samples, t0, t1, interval) {
    const yMax = niceMax(Math.max(0, ...samples.map((s) => s.fires_per_sec)));
    const root = frame('chart-fires', 'Fires per second over the last hour', yMax, fmtNum, t0, t1);
    const sc = scales(t0, t1, yMax);
    // One slot per interval; at least 1.5 units so a lone fire shows.
    const bw = Math.max((interval * 1000 / Math.max(t1 - t0, 1)) * PW - 0.3, 1.5);
    for (const s of samples) {
      if (!s.fires) continue;
      const y = sc.y(s.fires_per_sec);
      root.append(svg('rect', { class: 'fire', 'data-fires': s.fires, x: +(sc.x(s.t) - bw).toFixed(1), y, width: +bw.toFixed(1), height: +(PAD.top + PH - y).toFixed(1) },
        svg('title', null, `${s.fires} fired by ${clock(s.t)} (${fmtNum(s.fires_per_sec)}/s)`)));
    }
    const total = samples.reduce((n, s) => n + s.fires, 0);
    const last = samples[samples.length - 1];
    return card('Fires per second', root, legend([['fire', 'now', fmtNum(last.fires_per_sec) + '/s'], ['fire-total', 'fired this hour', fmtNum(total)]]));
  }

  // latenessChart draws p50, p90 and p99 as lines; an interval without
  // fires leaves a gap.
  function latenessChart(samples, t0, t1) {
    const fired = samples.filter((s) => s.lateness);
    // At least a millisecond high: stores keep times in whole ms, so a
    // quiet hour's latenesses are often all 0.
    const yMax = niceMax(Math.max(0.001, ...fired.map((s) => s.lateness.p99)));
    const root = frame('chart-lateness', 'Fire lateness percentiles over the last hour', yMax, fmtSeconds, t0, t1);
    const sc = scales(t0, t1, yMax);
    for (const p of PERCENTILES) {
      let d = '', prev = false;
      for (const s of samples) {
        if (!s.lateness) { prev = false; continue; }
        d += `${prev ? 'L' : 'M'}${sc.x(s.t)},${sc.y(s.lateness[p])}`;
        prev = true;
      }
      root.append(svg('path', { class: 'line ' + p, 'data-percentile': p, d: d || 'M0,0' }));
      for (const s of samples) {
        if (s.lateness) root.append(svg('circle', { class: 'dot ' + p, cx: sc.x(s.t), cy: sc.y(s.lateness[p]), r: 2 }));
      }
    }
    const last = fired[fired.length - 1];
    const note = last ? PERCENTILES.map((p) => [p, p, fmtSeconds(last.lateness[p])]) : [['none', 'no fires this hour', '']];
    return card('Fire lateness', root, legend(note));
  }

  // dueChart draws the due-time distribution: how many delayed jobs fall
  // due within the next minute, hour and day (each bar includes the
  // shorter ones).
  function dueChart(due) {
    const counts = due.buckets.map((b) => b.count);
    const yMax = niceMax(Math.max(0, ...counts));
    const root = frame('chart-due', 'Delayed jobs by due time', yMax, fmtNum);
    const slot = PW / due.buckets.length, bw = slot * 0.6;
    due.buckets.forEach((b, i) => {
      const x = PAD.left + slot * i + (slot - bw) / 2;
      const h = (b.count / yMax) * PH, y = PAD.top + PH - h;
      const label = (DUE_WITHIN.find(([w]) => w === b.within) || [b.within, 'within ' + b.within])[1];
      root.append(
        svg('rect', { class: 'due', 'data-within': b.within, 'data-count': b.count, x: x.toFixed(1), y: y.toFixed(1), width: bw.toFixed(1), height: h.toFixed(1) },
          svg('title', null, `${b.count} due within the ${label}`)),
        svg('text', { class: 'bar-value', x: (x + bw / 2).toFixed(1), y: (y - 3).toFixed(1), 'text-anchor': 'middle' }, fmtNum(b.count)),
        svg('text', { class: 'tick bar-label', x: (x + bw / 2).toFixed(1), y: H - 6, 'text-anchor': 'middle' }, label));
    });
    return card('Due in the…', root, el('p', { class: 'muted note' }, 'Delayed jobs due within each span from now; each bar includes the shorter spans.'));
  }

  function card(title, chart, below) {
    return el('figure', { class: 'chart-card' }, el('figcaption', null, title), chart, below);
  }

  // render replaces the charts with the latest history and due counts.
  function render(box, hist, due) {
    const cards = [];
    const status = el('p', { class: 'muted', id: 'charts-status' });
    if (!hist) {
      status.append('This server keeps no history: only the due-time distribution is shown.');
    } else if (!hist.sampled) {
      status.append(hist.sampled_topics >= hist.max_topics
        ? `Not sampled: ${hist.max_topics} other topics are (the history keeps at most that many).`
        : `No samples yet: the first is taken within ${hist.interval} s of the topic's first job.`);
    } else {
      const samples = hist.samples.map((s) => ({ ...s, t: Date.parse(s.at) }));
      const t1 = samples[samples.length - 1].t, t0 = t1 - hist.span * 1000;
      cards.push(statesChart(samples, t0, t1), firesChart(samples, t0, t1, hist.interval), latenessChart(samples, t0, t1));
      status.append(`${samples.length} sample(s), one every ${hist.interval} s; fires and lateness are this instance's own.`);
    }
    cards.push(dueChart(due));
    box.replaceChildren(el('h2', null, 'Last hour'), status, el('div', { class: 'charts' }, cards));
  }

  // mount returns the charts' section for topic and keeps it live until
  // alive() turns false (the page moved on). call is app.js's API caller.
  function mount(topic, deps) {
    el = deps.el;
    const box = el('section', { id: 'charts', 'aria-live': 'off' }, el('p', { class: 'muted' }, 'Loading charts…'));
    const tick = async () => {
      if (!deps.alive()) return;
      try {
        const [hist, due] = await Promise.all([
          deps.call('history', { topic }).catch((e) => { if (e.status === 404) return null; throw e; }),
          deps.call('due', { topic }, undefined, { within: DUE_WITHIN.map(([w]) => w).join(',') }),
        ]);
        if (!deps.alive()) return;
        render(box, hist, due);
      } catch (e) {
        if (!deps.alive()) return;
        box.replaceChildren(el('p', { class: 'muted', id: 'charts-status' }, 'Charts unavailable: ' + e.message));
      }
      setTimeout(tick, REFRESH_MS);
    };
    tick();
    return box;
  }

  return { mount };
})();
