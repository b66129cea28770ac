/* Small SVG charts: a frame with axes and ticks, the overview's activity
 * charts and the backoff explorer's plot. Sizes are in pixels of the
 * viewBox; CSS scales the whole chart to its box. */
'use strict';
(function () {
  const TK = window.TK;
  const { s } = TK;

  // Ticks at 1, 2 or 5 times a power of ten, about n of them up to max.
  TK.niceTicks = function (max, n, integer) {
    if (!(max > 0)) return [0, 1];
    const raw = integer ? Math.max(1, max / n) : max / n;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * p).find((v) => v >= raw);
    const out = [];
    for (let v = 0; v <= max + step * 1e-9; v += step) out.push(v);
    if (out[out.length - 1] < max) out.push(out[out.length - 1] + step);
    return out;
  };

  const DUR_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000, 15000, 30000,
    60000, 120000, 300000, 600000, 900000, 1800000, 3600000, 7200000, 21600000, 43200000, 86400000];

  // Ticks for durations: steps people read (250ms, 1s, 15s, 5m, 1h...).
  TK.durTicks = function (max, n) {
    if (!(max > 0)) return [0, 1];
    const raw = max / n;
    const step = DUR_STEPS.find((v) => v >= raw) || Math.ceil(raw / 86400000) * 86400000;
    const out = [];
    for (let v = 0; v < max + step; v += step) out.push(v);
    return out;
  };

  // A chart frame: grid lines and labels for the y ticks, labels for the x
  // ticks ({v, label}). Returns the svg, the scales and the plot's group.
  TK.frame = function (o) {
    const W = o.width, H = o.height;
    const m = { l: o.left || 48, r: 12, t: 10, b: 24 };
    const yTicks = o.yTicks;
    const ymax = yTicks[yTicks.length - 1] || 1;
    const ymin = o.ymin || 0;
    const x = (v) => m.l + ((v - o.xmin) / (o.xmax - o.xmin || 1)) * (W - m.l - m.r);
    const y = o.log
      ? (v) => H - m.b - ((Math.log10(Math.max(v, ymin)) - Math.log10(ymin)) /
          (Math.log10(ymax) - Math.log10(ymin) || 1)) * (H - m.t - m.b)
      : (v) => H - m.b - ((v - ymin) / (ymax - ymin || 1)) * (H - m.t - m.b);
    const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'chart', role: 'img',
      'aria-label': o.label || null });
    const grid = s('g', { class: 'grid' });
    for (const t of yTicks) {
      grid.appendChild(s('line', { x1: m.l, x2: W - m.r, y1: y(t), y2: y(t) }));
      grid.appendChild(s('text', { x: m.l - 6, y: y(t) + 4, 'text-anchor': 'end' }, t === 0 ? '0' : o.yFmt ? o.yFmt(t) : t));
    }
    for (const t of o.xTicks) {
      grid.appendChild(s('line', { class: 'xtick', x1: x(t.v), x2: x(t.v), y1: H - m.b, y2: H - m.b + 4 }));
      grid.appendChild(s('text', { x: x(t.v), y: H - 6, 'text-anchor': 'middle' }, t.label));
    }
    grid.appendChild(s('line', { class: 'axis', x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b }));
    svg.appendChild(grid);
    const plot = s('g', { class: 'plot' });
    svg.appendChild(plot);
    return { svg, plot, x, y, m, W, H };
  };

  const pad2 = (n) => String(n).padStart(2, '0');
  const clock = (t) => { const d = new Date(t); return pad2(d.getHours()) + ':' + pad2(d.getMinutes()); };

  // x ticks every `every` ms of wall time between a and b, as HH:MM.
  function timeTicks(a, b, every) {
    const out = [];
    for (let t = Math.ceil(a / every) * every; t <= b; t += every) out.push({ v: t, label: clock(t) });
    return out;
  }

  function bucketTitle(b, bucketMs) {
    return clock(b.start) + '–' + clock(b.start + bucketMs);
  }

  // An /activity answer's buckets, their width and the time they span (the
  // hour from `since` when there are none).
  function activitySpan(act) {
    const bms = act.bucket_ms || 60000;
    const bk = act.buckets || [];
    const xmin = bk.length ? bk[0].start : act.since;
    const xmax = bk.length ? bk[bk.length - 1].start + bms : act.since + 3600000;
    return { bms, bk, xmin, xmax };
  }

  // Attempts per bucket: succeeded and failed stacked, retries as a line.
  TK.throughputChart = function (act) {
    const { bms, bk, xmin, xmax } = activitySpan(act);
    const top = Math.max(5, ...bk.map((b) => b.succeeded + b.failed), ...bk.map((b) => b.retries));
    const f = TK.frame({ width: 600, height: 190, xmin, xmax, yTicks: TK.niceTicks(top, 4, true),
      yFmt: (v) => String(Math.round(v)), xTicks: timeTicks(xmin, xmax, 10 * 60000), left: 40,
      label: 'attempts per ' + TK.fmtDur(bms) });
    const bw = Math.max(1, (f.x(xmin + bms) - f.x(xmin)) * 0.8);
    for (const b of bk) {
      const x0 = f.x(b.start) + bw * 0.125;
      const title = s('title', null, `${bucketTitle(b, bms)}: ${b.succeeded} succeeded, ${b.failed} failed, ${b.retries} retries`);
      const g = s('g', null, title);
      if (b.succeeded) g.appendChild(s('rect', { class: 'fill-success', x: x0, width: bw, y: f.y(b.succeeded), height: f.y(0) - f.y(b.succeeded) }));
      if (b.failed) g.appendChild(s('rect', { class: 'fill-failure', x: x0, width: bw,
        y: f.y(b.succeeded + b.failed), height: f.y(b.succeeded) - f.y(b.succeeded + b.failed) }));
      g.appendChild(s('rect', { class: 'hit', x: x0, width: bw, y: f.m.t, height: f.y(0) - f.m.t }));
      f.plot.appendChild(g);
    }
    if (bk.some((b) => b.retries)) {
      const pts = bk.map((b) => `${f.x(b.start + bms / 2)},${f.y(b.retries)}`).join(' ');
      f.plot.appendChild(s('polyline', { class: 'line-retries', points: pts }));
    }
    return f.svg;
  };

  // Retry lateness per bucket: the average as an area, the maximum a line.
  TK.latenessChart = function (act) {
    const { bms, bk, xmin, xmax } = activitySpan(act);
    // At least 10ms tall: a retry 1ms late is not drawn as a peak.
    const top = Math.max(10, ...bk.map((b) => b.lateness_max_ms || 0));
    const f = TK.frame({ width: 600, height: 190, xmin, xmax, yTicks: TK.durTicks(top, 4), yFmt: TK.fmtDur,
      xTicks: timeTicks(xmin, xmax, 10 * 60000), left: 52, label: 'retry lateness' });
    const mid = (b) => f.x(b.start + bms / 2);
    const withData = bk.filter((b) => b.retries > 0 && b.lateness_avg_ms !== null && b.lateness_avg_ms !== undefined);
    if (withData.length) {
      const avg = withData.map((b) => `${mid(b)},${f.y(b.lateness_avg_ms)}`);
      const first = withData[0], last = withData[withData.length - 1];
      f.plot.appendChild(s('polygon', { class: 'area-lateness',
        points: `${mid(first)},${f.y(0)} ${avg.join(' ')} ${mid(last)},${f.y(0)}` }));
      f.plot.appendChild(s('polyline', { class: 'line-lateness', points: avg.join(' ') }));
      f.plot.appendChild(s('polyline', { class: 'line-lateness-max',
        points: withData.map((b) => `${mid(b)},${f.y(b.lateness_max_ms || 0)}`).join(' ') }));
      if (!withData.some((b) => b.lateness_max_ms > 0))
        f.svg.appendChild(s('text', { class: 'empty', x: f.W / 2, y: f.H / 2, 'text-anchor': 'middle' }, 'every retry started on time'));
      for (const b of withData)
        f.plot.appendChild(s('circle', { class: 'dot-lateness', cx: mid(b), cy: f.y(b.lateness_avg_ms), r: 2.5 },
          s('title', null, `${bucketTitle(b, bms)}: ${b.retries} retries, ${TK.fmtDur(b.lateness_avg_ms)} late on average, ${TK.fmtDur(b.lateness_max_ms)} at most`)));
    } else {
      f.svg.appendChild(s('text', { class: 'empty', x: f.W / 2, y: f.H / 2, 'text-anchor': 'middle' }, 'no retries in this window'));
    }
    return f.svg;
  };

  // Delay per attempt: the jitter band (min..max) shaded, the median a
  // line with points, the capped value before jitter dashed.
  TK.backoffChart = function (delays, log) {
    const n = delays.length;
    const top = Math.max(1, ...delays.map((d) => Math.max(d.max_ms, d.capped_ms)));
    let yTicks, ymin = 0;
    if (log) {
      const lo = Math.max(1, Math.min(...delays.map((d) => Math.max(1, d.min_ms))));
      ymin = Math.pow(10, Math.floor(Math.log10(lo)));
      yTicks = [];
      for (let v = ymin; v < top * 10; v *= 10) { yTicks.push(v); if (v >= top) break; }
    } else {
      yTicks = TK.durTicks(top, 5);
    }
    const every = Math.max(1, Math.ceil(n / 12));
    const xTicks = delays.filter((d, i) => i % every === 0 || i === n - 1).map((d) => ({ v: d.attempt, label: '#' + d.attempt }));
    const f = TK.frame({ width: 900, height: 300, xmin: 1 - 0.3, xmax: (n || 1) + 0.3, yTicks, ymin, log, yFmt: TK.fmtDur,
      xTicks, left: 60, label: 'delay before each retry' });
    if (!n) return f.svg;
    const band = delays.map((d) => `${f.x(d.attempt)},${f.y(d.max_ms)}`)
      .concat(delays.slice().reverse().map((d) => `${f.x(d.attempt)},${f.y(d.min_ms)}`));
    f.plot.appendChild(s('polygon', { class: 'band', points: band.join(' ') }));
    f.plot.appendChild(s('polyline', { class: 'line-capped', points: delays.map((d) => `${f.x(d.attempt)},${f.y(d.capped_ms)}`).join(' ') }));
    f.plot.appendChild(s('polyline', { class: 'line-median', points: delays.map((d) => `${f.x(d.attempt)},${f.y(d.median_ms)}`).join(' ') }));
    for (const d of delays)
      f.plot.appendChild(s('circle', { class: 'dot-median', cx: f.x(d.attempt), cy: f.y(d.median_ms), r: 3 },
        s('title', null, `after failure ${d.attempt}: median ${TK.fmtDur(d.median_ms)}, ${TK.fmtDur(d.min_ms)} to ${TK.fmtDur(d.max_ms)}, ${TK.fmtDur(d.capped_ms)} before jitter`)));
    return f.svg;
  };
})();
