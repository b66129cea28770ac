/* The task page: its DAG, each step's attempts on one time axis (with
 * each retry's delay, its source and how late the retry started), the
 * steps with their operator actions, transitions and batch items. */
'use strict';
(function () {
  const TK = window.TK;
  const { h, s } = TK;

  // Layers by depends_on (a step sits one right of its deepest parent),
  // each ordered by its parents' mean position so edges cross less.
  TK.layers = function (steps) {
    const byName = new Map(steps.map((st) => [st.name, st]));
    const depth = new Map();
    const depthOf = (st, seen) => {
      if (depth.has(st.name)) return depth.get(st.name);
      if (seen.has(st.name)) return 0; /* a cycle cannot be stored; be safe */
      seen.add(st.name);
      let d = 0;
      for (const p of st.depends_on || []) if (byName.has(p)) d = Math.max(d, depthOf(byName.get(p), seen) + 1);
      depth.set(st.name, d);
      return d;
    };
    const layers = [];
    for (const st of steps) {
      const d = depthOf(st, new Set());
      (layers[d] = layers[d] || []).push(st);
    }
    const pos = new Map();
    layers.forEach((layer, i) => {
      if (i > 0) {
        const key = (st) => {
          const ps = (st.depends_on || []).filter((p) => pos.has(p));
          return ps.length ? ps.reduce((a, p) => a + pos.get(p), 0) / ps.length : 0;
        };
        layer.sort((a, b) => key(a) - key(b));
      }
      layer.forEach((st, j) => pos.set(st.name, j));
    });
    return layers.filter(Boolean);
  };

  const clip = (t, n) => (t.length > n ? t.slice(0, n - 1) + '…' : t);

  // The edge from parent p to st: chosen by a decision, or leading to a
  // step that was skipped (a branch not chosen, or all parents skipped).
  const edgeClass = (p, st) => {
    if (p && Array.isArray(p.decides) && p.decides.includes(st.name) && Array.isArray(p.chosen) &&
        p.chosen.includes(st.name)) return 'edge chosen';
    return st.state === 'skipped' ? 'edge not-chosen' : 'edge';
  };

  // A map step's instances in a few words: "3/10 done · 1 failed" (the
  // node's title has the waiting ones too).
  TK.instancesText = (c) => `${c.done}/${c.total} done` + (c.failed ? ` · ${c.failed} failed` : '');

  // The second line of a DAG node: its state (and attempts), or what it
  // did in the flow: why it was skipped, what it chose, its instances.
  function nodeSub(st) {
    if (!st.state) return st.handler ? [st.handler.kind, st.handler.name || st.handler.method || ''].join(' ').trim() : '';
    if (st.state === 'skipped') return 'skipped' + (st.skipped_reason ? ' · ' + st.skipped_reason : '');
    if (st.instances && typeof st.instances === 'object') return TK.instancesText(st.instances);
    if (st.state === 'waiting') return waitingLabel(st) + (st.max_attempts ? ` · ${st.attempts}/${st.max_attempts}` : '');
    if (Array.isArray(st.chosen)) return TK.stateLabel(st.state) + ' · chose ' + (st.chosen.join(', ') || 'none');
    return TK.stateLabel(st.state) + (st.max_attempts ? ` · ${st.attempts}/${st.max_attempts}` : '');
  }

  // The DAG, left to right; nodes coloured by state (neutral without one).
  TK.dagSvg = function (steps, onPick) {
    const layers = TK.layers(steps);
    const NW = 196, NH = 46, GX = 64, GY = 16, P = 8;
    const rows = Math.max(...layers.map((l) => l.length));
    const W = P * 2 + layers.length * NW + (layers.length - 1) * GX;
    const H = P * 2 + rows * NH + (rows - 1) * GY;
    const at = new Map();
    layers.forEach((layer, i) => {
      const off = ((rows - layer.length) * (NH + GY)) / 2;
      layer.forEach((st, j) => at.set(st.name, { x: P + i * (NW + GX), y: P + off + j * (NH + GY) }));
    });
    // Room above for a map's stack.
    const svg = s('svg', { viewBox: `0 -6 ${W + 6} ${H + 6}`, width: W + 6, height: H + 6, class: 'dag', role: 'img', 'aria-label': 'steps and their dependencies' },
      s('defs', null, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
        s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' })),
      s('marker', { id: 'arrow-chosen', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse' },
        s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead chosen' }))));
    const byName = new Map(steps.map((st) => [st.name, st]));
    for (const st of steps) {
      const b = at.get(st.name);
      for (const p of st.depends_on || []) {
        const a = at.get(p);
        if (!a) continue;
        const x1 = a.x + NW, y1 = a.y + NH / 2, x2 = b.x - 2, y2 = b.y + NH / 2, mx = (x1 + x2) / 2;
        const cls = edgeClass(byName.get(p), st);
        svg.appendChild(s('path', { class: cls, d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`,
          'marker-end': cls === 'edge chosen' ? 'url(#arrow-chosen)' : 'url(#arrow)' }));
      }
    }
    for (const st of steps) {
      const { x, y } = at.get(st.name);
      const state = st.state || 'none';
      const sub = nodeSub(st);
      const isMap = !!st.map;
      const c = st.instances && typeof st.instances === 'object' ? st.instances : null;
      const title = st.name + (st.state ? ': ' + TK.stateLabel(st.state) : '') +
        (st.skipped_reason ? ' (' + st.skipped_reason + ')' : '') +
        (Array.isArray(st.decides) ? '\ndecides between ' + st.decides.join(', ') : '') +
        (c ? `\n${c.total} instances: ${c.done} done, ${c.failed} failed, ${c.waiting} waiting` : '') +
        (st.last_error ? '\n' + st.last_error : '');
      const g = s('g', { class: 'node st-' + state.replace(/[^a-z_]/g, '') + (isMap ? ' map' : '') + (st.decides ? ' decision' : ''),
        transform: `translate(${x},${y})`, onclick: onPick ? () => onPick(st.name) : null },
      s('title', null, title),
      // A map is drawn as a stack: one node standing for its instances.
      isMap ? s('rect', { class: 'stack', x: 6, y: -6, width: NW, height: NH, rx: 7 }) : null,
      isMap ? s('rect', { class: 'stack', x: 3, y: -3, width: NW, height: NH, rx: 7 }) : null,
      s('rect', { class: 'box', width: NW, height: NH, rx: 7 }),
      s('rect', { class: 'node-bar', width: 6, height: NH, rx: 3 }),
      s('text', { x: 14, y: 19, class: 'node-name' }, clip(st.name, 22)),
      st.decides ? s('text', { x: NW - 8, y: 17, class: 'decides-mark', 'text-anchor': 'end' }, 'decides') : null,
      isMap && !c ? s('text', { x: NW - 8, y: 17, class: 'decides-mark', 'text-anchor': 'end' }, 'map') : null,
      s('text', { x: 14, y: 36, class: 'node-sub' }, clip(sub, 32)));
      if (c && c.total > 0) {
        // Its instances as a bar: done, failed, the rest.
        const bw = NW - 22, wd = (bw * c.done) / c.total, wf = (bw * c.failed) / c.total;
        g.appendChild(s('rect', { class: 'map-rest', x: 14, y: NH - 6, width: bw, height: 3 }));
        g.appendChild(s('rect', { class: 'map-done', x: 14, y: NH - 6, width: wd, height: 3 }));
        g.appendChild(s('rect', { class: 'map-failed', x: 14 + wd, y: NH - 6, width: wf, height: 3 }));
      }
      svg.appendChild(g);
    }
    return svg;
  };

  const outcomeClass = (o) => 'oc-' + String(o || 'running').replace(/[^a-z_]/g, '');
  const sourceClass = (src) => 'src-' + String(src || 'computed').replace(/[^a-z_]/g, '');

  // What an attempt is: its outcome once finished; while open, waiting
  // when its step is a wait step waiting for its signal (DESIGN §18: no
  // handler runs), else running.
  const attemptState = (st, a) => a.finished_at !== null && a.finished_at !== undefined ? a.outcome
    : st.state === 'waiting' ? 'waiting' : 'running';
  // What a waiting step waits for (its waits_for: DESIGN §18).
  const WAITS_FOR = { signal: 'waiting for a signal', callback: 'waiting for a callback',
    child: 'waiting for its child task' };
  const waitingLabel = (st) => WAITS_FOR[st.waits_for] || WAITS_FOR.signal;
  const attemptLabel = (st, a) => attemptState(st, a) === 'waiting' ? waitingLabel(st)
    : TK.stateLabel(attemptState(st, a));

  function attemptTitle(st, a) {
    const lines = [`${st.name} attempt ${a.attempt}: ${attemptLabel(st, a)}`,
      `started ${TK.fmtAbs(a.started_at)}` + (a.finished_at !== null ? `, took ${TK.fmtDur(a.finished_at - a.started_at)}` : '')];
    if (a.due_at !== null && a.due_at !== undefined) lines.push(`due ${TK.fmtAbs(a.due_at)} (${TK.fmtDur(a.started_at - a.due_at)} late)`);
    if (a.owner) lines.push('by ' + a.owner);
    if (a.error) lines.push('error: ' + a.error);
    return lines.join('\n');
  }

  // Every step's attempts on one axis: a bar per attempt (outcome), then
  // its retry delay up to next_run_at (source), then lateness until the
  // next attempt started.
  TK.timelineSvg = function (task, order, width) {
    const steps = order.filter((st) => (st.history || []).length || st.state === 'waiting_for_retry');
    const now = TK.now();
    let t0 = Infinity, t1 = -Infinity;
    for (const st of steps) {
      for (const a of st.history) {
        for (const v of [a.started_at, a.due_at]) if (v !== null && v !== undefined) t0 = Math.min(t0, v);
        for (const v of [a.started_at, a.finished_at, a.next_run_at]) if (v !== null && v !== undefined) t1 = Math.max(t1, v);
        if (a.finished_at === null) t1 = Math.max(t1, now);
      }
    }
    if (!steps.length || t0 === Infinity) return h('p', { class: 'muted' }, 'No attempt has started yet.');
    if (t1 - t0 < 10) t1 = t0 + 10;
    // Drawn at the box's own width, so text keeps its size on any screen.
    const LW = 170, W = Math.max(720, Math.round(width || 1180)), RH = 40, TOP = 28, RIGHT = 20;
    const H = TOP + steps.length * RH + 18;
    const x = (t) => LW + ((t - t0) / (t1 - t0)) * (W - LW - RIGHT);
    const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'timeline', role: 'img',
      'aria-label': 'attempts over time' });
    const axis = s('g', { class: 'grid' }, s('title', null, 'time since ' + TK.fmtAbs(t0)));
    for (const v of TK.durTicks(t1 - t0, Math.max(4, Math.floor((W - LW) / 130)))) {
      if (v > t1 - t0) break;
      axis.appendChild(s('line', { x1: x(t0 + v), x2: x(t0 + v), y1: TOP - 6, y2: H }));
      axis.appendChild(s('text', { x: x(t0 + v), y: TOP - 10, 'text-anchor': 'middle' }, v ? '+' + TK.fmtDur(v) : TK.fmtAbs(t0).slice(11, 23)));
    }
    svg.appendChild(axis);
    steps.forEach((st, i) => {
      const y = TOP + i * RH, mid = y + RH / 2;
      const row = s('g', { class: 'tl-row' });
      row.appendChild(s('rect', { class: 'tl-band' + (i % 2 ? ' odd' : ''), x: 0, y, width: W, height: RH }));
      row.appendChild(s('text', { x: 8, y: mid + 4, class: 'tl-label' }, s('title', null, st.name), clip(st.name, 22)));
      st.history.forEach((a) => {
        const xs = x(a.started_at);
        const end = a.finished_at !== null && a.finished_at !== undefined ? a.finished_at : now;
        // Lateness first, under the attempt: from when it was due to when it started.
        if (a.due_at !== null && a.due_at !== undefined && a.started_at > a.due_at) {
          const xd = x(a.due_at);
          row.appendChild(s('rect', { class: 'late', x: xd, y: mid + 9, width: Math.max(1.5, xs - xd), height: 4 },
            s('title', null, `attempt ${a.attempt} started ${TK.fmtDur(a.started_at - a.due_at)} after it was due`)));
          if (xs - xd > 50)
            row.appendChild(s('text', { class: 'late-label', x: (xs + xd) / 2, y: mid + 19, 'text-anchor': 'middle' }, '+' + TK.fmtDur(a.started_at - a.due_at) + ' late'));
        }
        const xe = Math.max(x(end), xs + 4);
        row.appendChild(s('rect', { class: 'attempt ' + outcomeClass(attemptState(st, a)), x: xs, y: mid - 8, width: xe - xs, height: 16, rx: 2 },
          s('title', null, attemptTitle(st, a))));
        if (a.next_run_at !== null && a.next_run_at !== undefined && a.delay_ms !== null && a.delay_ms !== undefined) {
          const xn = Math.max(x(a.next_run_at), xe + 2);
          const cls = sourceClass(a.delay_source);
          const g = s('g', { class: 'delay ' + cls },
            s('title', null, `retry delay after attempt ${a.attempt}: ${TK.fmtDur(a.delay_ms)} (${a.delay_source}: ${TK.SOURCES[a.delay_source] || ''})\nnext run ${TK.fmtAbs(a.next_run_at)}`),
            s('line', { x1: xe + 1, x2: xn, y1: mid, y2: mid }),
            s('line', { class: 'tick', x1: xn, x2: xn, y1: mid - 7, y2: mid + 7 }),
            s('rect', { class: 'hit', x: xe, y: mid - 8, width: Math.max(2, xn - xe), height: 16 }));
          const label = TK.fmtDur(a.delay_ms) + ' ' + a.delay_source;
          if (xn - xe > label.length * 6.2 + 6)
            g.appendChild(s('text', { x: (xe + xn) / 2, y: mid - 5, 'text-anchor': 'middle' }, label));
          row.appendChild(g);
        }
      });
      svg.appendChild(row);
    });
    // Over the rows: where "now" is while the task still has a retry ahead.
    if (now >= t0 && now <= t1)
      svg.appendChild(s('g', { class: 'now' }, s('title', null, 'now: ' + TK.fmtAbs(now)),
        s('line', { x1: x(now), x2: x(now), y1: TOP - 4, y2: H - 14 }),
        s('text', { x: x(now), y: H - 2, 'text-anchor': 'middle' }, 'now')));
    return svg;
  };

  TK.timelineLegend = function () {
    return h('div', { class: 'legends' },
      TK.legend(TK.OUTCOMES.map((o) => ['sw-' + outcomeClass(o), TK.stateLabel(o)]).concat([['sw-oc-running', 'running'],
        ['sw-oc-waiting', 'waiting', 'an attempt open until its signal, its callback or its child task\'s end comes, or it times out']])),
      TK.legend(Object.keys(TK.SOURCES).map((k) => ['sw-line ' + sourceClass(k), k + ' delay', TK.SOURCES[k]])
        .concat([['sw-late', 'late start', 'from when the retry was due to when it started']])));
  };

  /* ---- the page ---- */

  // POST one operator action; say in msgEl what happened, then refresh.
  async function act(msgEl, path, what, after) {
    try {
      const r = await TK.api(path, { method: 'POST' });
      TK.flash(msgEl, 'ok', what + ' done' + (r && r.task_state ? ': the task is now ' + TK.stateLabel(r.task_state) : '') + '.');
      after();
    } catch (e) {
      TK.flash(msgEl, 'error', what + ' failed: ' + e.message);
    }
  }

  // Why a step is where it is; in words for what the flow did to it (a
  // skipped step's reason, a map's wait, the parents a step waits for)
  // and what a decision chose.
  function whyCell(st) {
    if (!st.why) return '';
    const label = h('span', { title: st.why.detail || '' }, TK.stateLabel(st.why.reason));
    if (st.state === 'skipped') return [label, ': ', h('span', { class: 'skip-reason' }, st.why.detail)];
    // A ready step its queue holds back (DESIGN §19): no room, or no token.
    if (st.why.reason === 'waiting_for_queue')
      return [label, ': ', h('span', { class: 'muted' }, st.why.detail)];
    // A worker step (DESIGN §19): only its queue's outside workers run it.
    if (st.worker_queue && (st.why.reason === 'ready' || st.why.reason === 'running'))
      return [label, ': ', h('span', { class: 'muted' }, st.why.reason === 'ready'
        ? `waiting for a worker of queue ${st.worker_queue}` : `a worker of queue ${st.worker_queue} holds it`)];
    if (st.state === 'mapped' || (st.why.reason === 'waiting_for_dependencies' && (st.why.blocking || []).length))
      return [label, ': ', h('span', { class: 'muted' }, st.state === 'mapped' ? st.why.detail
        : 'waiting for ' + st.why.blocking.map((b) => `${b.step} (${TK.stateLabel(b.state)})`).join(', '))];
    // A wait step (DESIGN §18): what it waits for, and until when.
    // A task step waiting for its child (docs/children.md): a link to it.
    if (st.why.reason === 'waiting_for_child')
      return [label, ': ', TK.taskLink(st.why.child), h('span', { class: 'muted' },
        ` since ${TK.fmtAbs(st.why.since)}` + (st.why.until ? `, times out ${TK.fmtAbs(st.why.until)}` : ''))];
    if (st.why.reason === 'waiting_for_signal' || st.why.reason === 'waiting_for_callback')
      return [label, ': ', h('span', { class: 'muted' }, `since ${TK.fmtAbs(st.why.since)}, times out ${TK.fmtAbs(st.why.until)}`)];
    if (Array.isArray(st.chosen))
      return [label, ': ', h('span', { class: 'chosen-list' }, 'chose ' + (st.chosen.join(', ') || 'none'))];
    return label;
  }

  // The steps' rows, with Retry and Resolve for a step in error.
  // Retry and Resolve of a step (or a map's instance) in error. A map
  // step itself is retried through its failed instances, so it offers
  // Resolve only.
  function errorActions(task, st, msgEl, refresh) {
    if (st.state !== 'error') return [];
    const base = '/tasks/' + encodeURIComponent(task.id) + '/steps/' + encodeURIComponent(st.name);
    return [
      st.map ? null : h('button', { class: 'small', title: 'retry with fresh attempts',
        onclick: () => act(msgEl, base + '/retry', `Retry of ${st.name}`, refresh) }, 'Retry'),
      h('button', { class: 'small', title: 'mark as done by hand: its children may run',
        onclick: () => act(msgEl, base + '/resolve', `Resolve of ${st.name}`, refresh) }, 'Resolve')];
  }

  // Signal… on a wait step that waits for its signal (DESIGN §18): a box
  // for the JSON that become its results, or a message that fails its
  // attempt, and an optional idempotency key. The rules are the server's
  // (POST .../signal); a refusal is said in msgEl.
  function signalAction(task, st, msgEl, refresh) {
    if (st.state !== 'waiting' || !st.why || st.why.waits_for !== 'signal') return [];
    const path = '/tasks/' + encodeURIComponent(task.id) + '/steps/' + encodeURIComponent(st.name) + '/signal';
    const data = h('textarea', { class: 'signal-data', rows: '4', cols: '32', spellcheck: 'false',
      'aria-label': 'signal data (JSON)' });
    data.value = '{\n  "approved": true\n}';
    const key = h('input', { class: 'signal-key', type: 'text', placeholder: 'idempotency key (optional)', size: '24' });
    const send = async (body, what) => {
      if (key.value.trim()) body.key = key.value.trim();
      try {
        const r = await TK.api(path, { method: 'POST', body });
        TK.flash(msgEl, 'ok', `${what} of ${st.name} ${r.duplicate ? 'was already sent (same key)' : 'sent'}: an orchestrator delivers it.`);
        refresh();
      } catch (e) {
        TK.flash(msgEl, 'error', `${what} of ${st.name} failed: ${e.message}`);
      }
    };
    const form = h('div', { class: 'signal-form' },
      h('label', null, 'JSON data (the step\'s results)'), data, key,
      h('div', null,
        h('button', { class: 'small', title: 'complete the step with this JSON as its results',
          onclick: () => {
            try { JSON.parse(data.value); } catch (e) { TK.flash(msgEl, 'error', 'The signal\'s data are not JSON: ' + e.message); return; }
            send({ data: JSON.parse(data.value) }, 'Signal');
          } }, 'Send'),
        h('button', { class: 'small', title: 'fail the attempt with the box\'s text as its message (retried under its retry policy)',
          onclick: () => send({ error: data.value.trim() || 'failed by a signal' }, 'Failing signal') }, 'Send as failure')));
    const open = h('button', { class: 'small', title: 'send the signal this step waits for',
      onclick: () => { form.hidden = !form.hidden; } }, 'Signal…');
    return [open, form];
  }

  function stepRows(task, order, msgEl, refresh) {
    return order.map((st) => {
      const actions = errorActions(task, st, msgEl, refresh).concat(signalAction(task, st, msgEl, refresh));
      // The latest retry's delay: a finished step's last attempt has none.
      const last = (st.history || []).filter((a) => a.delay_ms !== null && a.delay_ms !== undefined).pop();
      return h('tr', { id: 'step-' + st.name },
        h('td', null, h('strong', null, st.name), st.queue ? h('a', { class: 'qname', href: '#/queues', title: 'its queue, whose limits its claims obey' }, st.queue) : null),
        h('td', null, TK.badge(st.state)),
        h('td', { class: 'num' }, `${st.attempts}/${st.max_attempts}`),
        // A task step waiting without a timeout has none (run_at the largest integer).
        h('td', null, (st.state === 'waiting_for_retry' || st.state === 'waiting' || (st.state === 'pending' && !st.parents_remaining)) && st.run_at < 8e18 ? TK.time(st.run_at) : h('span', { class: 'muted' }, '–')),
        h('td', null, last && last.delay_source ? h('span', { class: 'src-badge ' + sourceClass(last.delay_source) }, `${TK.fmtDur(last.delay_ms)} ${last.delay_source}`) : ''),
        h('td', { class: 'why' }, whyCell(st)),
        h('td', { class: 'err' }, st.last_error ? h('span', { class: 'error-text', title: st.last_error }, st.last_error) : ''),
        h('td', { class: 'actions' }, actions));
    });
  }

  // Every attempt of every step, in the DAG's order, as numbers.
  function attemptsTable(order) {
    const rows = [];
    for (const st of order) {
      for (const a of st.history || []) {
        const late = a.due_at !== null && a.due_at !== undefined ? a.started_at - a.due_at : null;
        rows.push(h('tr', null,
          h('td', null, st.name),
          h('td', { class: 'num' }, '#' + a.attempt),
          h('td', null, h('span', { title: TK.fmtAbs(a.started_at) }, TK.fmtAbs(a.started_at).slice(11, 23))),
          h('td', { class: 'num' }, a.finished_at !== null ? TK.fmtDur(a.finished_at - a.started_at) : 'running'),
          h('td', null, h('span', { class: 'oc ' + outcomeClass(attemptState(st, a)) }, attemptLabel(st, a))),
          h('td', { class: 'num' }, late === null ? h('span', { class: 'muted' }, '–') : late <= 0 ? 'on time' : TK.fmtDur(late)),
          h('td', null, a.delay_ms !== null && a.delay_ms !== undefined
            ? [TK.fmtDur(a.delay_ms), ' ', h('span', { class: 'src-badge ' + sourceClass(a.delay_source), title: TK.SOURCES[a.delay_source] || '' }, a.delay_source)]
            : h('span', { class: 'muted' }, '–')),
          h('td', { class: 'muted small' }, a.owner || ''),
          h('td', { class: 'err' }, a.error ? h('span', { class: 'error-text', title: a.error }, a.error) : '')));
      }
    }
    if (!rows.length) return h('p', { class: 'muted' }, 'No attempts yet.');
    return h('table', { class: 'grid-table attempts' },
      TK.thead(['step', 'attempt', 'started', 'took', 'outcome', 'late by', 'then retry after', 'owner', 'error']),
      h('tbody', null, rows));
  }

  // The audit trail: every state change of the task and its steps.
  function transitionsTable(task) {
    const tr = task.transitions || [];
    return h('table', { class: 'grid-table' },
      TK.thead(['at', 'step', 'from', 'to', 'reason', 'attempt']),
      h('tbody', null, tr.map((t) => h('tr', null,
        h('td', null, h('span', { title: TK.fmtAbs(t.at) }, TK.fmtAbs(t.at).slice(11, 23))),
        h('td', null, t.step || h('span', { class: 'muted' }, 'task')),
        h('td', null, t.from ? TK.badge(t.from) : ''),
        h('td', null, TK.badge(t.to)),
        h('td', null, t.reason || ''),
        h('td', { class: 'num' }, t.attempt === null || t.attempt === undefined ? '' : '#' + t.attempt)))));
  }

  // Batch steps: counts of their items, and the items that gave up.
  function itemsTable(order) {
    const parts = [];
    for (const st of order) {
      const it = st.items;
      if (!it || typeof it !== 'object') continue;
      parts.push(h('h3', null, st.name),
        h('p', { class: 'item-counts' },
          `${it.total} in all: ${it.acked} acknowledged, ${it.pending} pending, `,
          h('span', { class: it.gave_up ? 'err-count' : null }, `${it.gave_up} gave up`)));
      const given = Array.isArray(it.given_up) ? it.given_up : [];
      if (given.length)
        parts.push(h('table', { class: 'grid-table' },
          TK.thead(['item', 'attempts', 'last error']),
          h('tbody', null, given.map((g) => h('tr', null,
            h('td', { class: 'mono' }, String(g.key)),
            h('td', { class: 'num' }, g.attempts === undefined ? '' : String(g.attempts)),
            h('td', { class: 'err' }, g.last_error ? h('span', { class: 'error-text', title: g.last_error }, g.last_error) : ''))))),
        given.length < it.gave_up ? h('p', { class: 'muted' }, `the first ${given.length} of ${it.gave_up}`) : null);
    }
    return parts.length ? h('section', { class: 'card' }, h('h2', null, 'Batch items'), parts) : h('span');
  }

  // One map step's instances: its counts, a page of them and the pager
  // (#/task/ID?instances=STEP&after=N reads the page after N).
  function instancesPart(task, st, page, after, msgEl, refresh) {
    const c = st.instances;
    const rows = (page.instances || []).map((i) => h('tr', { id: 'instance-' + i.name },
      h('td', { class: 'num' }, String(i.item_index)),
      h('td', null, i.name),
      h('td', null, TK.badge(i.state)),
      h('td', { class: 'num' }, `${i.attempts}/${i.max_attempts}`),
      h('td', { class: 'mono' }, clip(JSON.stringify(i.item), 80)),
      h('td', { class: 'err' }, i.last_error ? h('span', { class: 'error-text', title: i.last_error }, i.last_error) : ''),
      h('td', { class: 'actions' }, errorActions(task, i, msgEl, refresh))));
    const href = (cursor) => '#/task/' + encodeURIComponent(task.id) +
      TK.qs(cursor === null ? {} : { instances: st.name, after: cursor });
    return [h('h3', null, st.name),
      h('p', { class: 'item-counts' }, `${c.total} instances: ${c.done} done, `,
        h('span', { class: c.failed ? 'err-count' : null }, `${c.failed} failed`), `, ${c.waiting} waiting`,
        st.map && st.map.max_failures ? h('span', { class: 'muted' }, ` (up to ${st.map.max_failures} may fail)`) : null),
      h('table', { class: 'grid-table instances' }, TK.thead(['#', 'instance', 'state', 'attempts', 'item', 'last error', '']),
        h('tbody', null, rows)),
      h('div', { class: 'instances-pager' },
        after !== null ? h('a', { class: 'button', href: href(null) }, '⇤ First instances') : null,
        page.next_after !== null && page.next_after !== undefined
          ? h('a', { class: 'button more', href: href(page.next_after) }, `More (after #${page.next_after}) →`)
          : h('span', { class: 'muted' }, 'last instances'))];
  }

  TK.views.task = function (params) {
    const id = params.parts[0];
    const msg = h('div', { class: 'msgs' });
    const head = h('div');
    const dag = h('div', { class: 'dag-wrap' });
    const tl = h('div', { class: 'timeline-wrap' });
    const steps = h('div');
    const attempts = h('div');
    const trans = h('div');
    const items = h('div');
    const instances = h('div');
    const ctx = h('div');
    // The page of one map's instances the URL asks for (the others: first).
    const pageStep = params.q.get('instances'), pageAfter = params.q.get('after');
    const results = h('div');
    const el = h('div', { class: 'page' },
      h('div', { class: 'crumbs' }, h('a', { href: '#/tasks' }, 'Tasks'), ' / ', 'task ' + id),
      head, msg,
      h('section', { class: 'card' }, h('h2', null, 'Steps'), steps),
      h('section', { class: 'card' }, h('h2', null, 'Dependencies'), dag),
      instances,
      h('section', { class: 'card' }, h('h2', null, 'Attempts over time'), TK.timelineLegend(), tl),
      h('section', { class: 'card' }, h('h2', null, 'Attempts'), attempts),
      items,
      h('section', { class: 'card' }, h('details', null, h('summary', null, 'Transitions'), trans)),
      h('section', { class: 'card' }, h('details', null, h('summary', null, 'Steps\u2019 results'), results)),
      h('section', { class: 'card' }, h('details', null, h('summary', null, 'Context'), ctx)));
    let refresh;
    const pick = (name) => {
      const row = document.getElementById('step-' + name);
      if (row) { row.scrollIntoView({ block: 'center' }); row.classList.add('flash-row'); setTimeout(() => row.classList.remove('flash-row'), 1200); }
    };
    refresh = async function () {
      let task;
      try {
        task = await TK.api('/tasks/' + encodeURIComponent(id));
      } catch (e) {
        TK.swap(head, { error: e.message }, () => h('div', null, h('h1', null, 'Task ' + id), TK.errorBox(e)));
        return;
      }
      const order = TK.layers(task.steps || []).flat();
      TK.swap(head, [task.id, task.state, task.cancellable, task.template, task.created_at, task.updated_at, task.finished_at, task.steps_done, task.steps_total, task.identity, task.priority, task.parent, task.children], () =>
        h('div', { class: 'task-head' },
          h('div', { class: 'title-row' },
            h('h1', null, 'Task ' + task.id, ' ', TK.badge(task.state, 'big')),
            // The library's rule (every state but complete and cancelled).
            task.cancellable
              ? h('button', { class: 'danger', onclick: () => {
                if (window.confirm('Cancel task ' + task.id + '? Its steps that have not finished will not run.'))
                  act(msg, '/tasks/' + encodeURIComponent(task.id) + '/cancel', 'Cancel of task ' + task.id, refresh);
              } }, 'Cancel task')
              : null),
          h('dl', { class: 'facts' },
            h('dt', null, 'template'), h('dd', null, TK.templateLink(task.template), ' ', h('span', { class: 'muted' }, task.template.version)),
            h('dt', null, 'progress'), h('dd', null, `${task.steps_done}/${task.steps_total} steps done`),
            task.identity ? [h('dt', null, 'identity'), h('dd', null, task.identity)] : null,
            // Parent and children link both ways (docs/children.md).
            task.parent ? [h('dt', null, 'parent'), h('dd', { class: 'parent-task' }, TK.taskLink(task.parent.task),
              ` step ${task.parent.step} attempt ${task.parent.attempt}`)] : null,
            (task.children || []).length ? [h('dt', null, 'children'), h('dd', { class: 'child-tasks' },
              task.children.map((c, i) => [i ? ', ' : '', TK.taskLink(c.id), ' ', TK.badge(c.state),
                h('span', { class: 'muted' }, ` ${c.step} attempt ${c.attempt}`)]))] : null,
            h('dt', null, 'priority'), h('dd', { title: 'among ready steps, those of tasks of higher priority are claimed first' }, String(task.priority ?? 0), task.priority ? null : h('span', { class: 'muted' }, ' (the default)')),
            h('dt', null, 'created'), h('dd', null, TK.time(task.created_at)),
            h('dt', null, 'updated'), h('dd', null, TK.time(task.updated_at)),
            task.finished_at ? [h('dt', null, 'finished'), h('dd', null, TK.time(task.finished_at), ' (took ', TK.fmtDur(task.finished_at - task.created_at), ')')] : null)));
      TK.swap(steps, task.steps, () => h('table', { class: 'grid-table' },
        TK.thead(['step', 'state', 'attempts', 'next run', 'last delay', 'why', 'last error', '']),
        h('tbody', null, stepRows(task, order, msg, refresh))));
      TK.swap(dag, task.steps.map((st) => [st.name, st.state, st.attempts, st.depends_on, st.last_error, st.chosen, st.instances]), () =>
        h('div', null, TK.dagSvg(order, pick), TK.legend(TK.STEP_STATES.map((st) => ['sw-st-' + st, TK.stateLabel(st)])
          .concat(task.steps.some((st) => st.decides)
            ? [['sw-edge chosen', 'chosen branch', 'the decision chose this step'],
              ['sw-edge not-chosen', 'skipped path', 'this step was skipped: not chosen, or all its parents were']]
            : []))));
      const running = task.steps.some((st) => (st.history || []).some((a) => a.finished_at === null));
      TK.swap(tl, running ? [task.steps, TK.now()] : task.steps, () => TK.timelineSvg(task, order, tl.clientWidth));
      TK.swap(attempts, task.steps, () => attemptsTable(order));
      TK.swap(trans, task.transitions, () => transitionsTable(task));
      TK.swap(items, task.steps.map((st) => st.items || null), () => itemsTable(order));
      const maps = order.filter((st) => st.instances && typeof st.instances === 'object' && st.instances.total > 0);
      const pages = new Map();
      for (const st of maps) {
        if (st.name === pageStep && pageAfter !== null) {
          pages.set(st.name, await TK.apiInto(instances, '/tasks/' + encodeURIComponent(task.id) + '/steps/' +
            encodeURIComponent(st.name) + '/instances' + TK.qs({ after: pageAfter, limit: TK.PAGE })));
        } else {
          pages.set(st.name, { instances: st.instances.first || [], next_after: st.instances.next_after });
        }
      }
      TK.swap(instances, maps.map((st) => [st.name, st.instances, pages.get(st.name)]), () => maps.length
        ? h('section', { class: 'card', id: 'instances' }, h('h2', null, 'Map instances'),
          maps.map((st) => instancesPart(task, st, pages.get(st.name), st.name === pageStep ? pageAfter : null, msg, refresh)))
        : h('span'));
      TK.swap(results, task.steps.map((st) => st.results === undefined ? null : st.results), () => {
        const with_ = order.filter((st) => st.results !== null && st.results !== undefined);
        return with_.length
          ? h('div', null, with_.map((st) => [h('h3', null, st.name), h('pre', { class: 'json' }, JSON.stringify(st.results, null, 2))]))
          : h('p', { class: 'muted' }, 'No step has results.');
      });
      TK.swap(ctx, task.context, () => h('pre', { class: 'json' }, JSON.stringify(task.context, null, 2)));
    };
    return { el, refresh, title: 'Task ' + id };
  };
})();
