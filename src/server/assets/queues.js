/* The queues (DESIGN §19): each queue's depth, what is in progress
 * against its concurrency limit, its rate and tokens, how long its
 * oldest ready step has waited, and the workers seen polling it, as
 * GET /api/v1/queues reports them (the report `tasker queues` prints). */
'use strict';
(function () {
  const TK = window.TK;
  const { h, table } = TK;

  const dash = () => h('span', { class: 'muted' }, '–');

  // In progress against the limit: "3 / 10" over a meter that fills up.
  function inProgress(q) {
    if (q.concurrency === null) return h('span', { class: 'num' }, String(q.in_progress));
    const full = Math.min(1, q.in_progress / q.concurrency);
    return h('div', { class: 'qmeter', title: `${q.in_progress} of at most ${q.concurrency} in progress at once` },
      h('span', { class: 'num' }, `${q.in_progress} / ${q.concurrency}`),
      h('span', { class: 'qbar' }, h('span', { class: 'qfill' + (full >= 1 ? ' qfull' : ''), style: { width: (full * 100).toFixed(1) + '%' } })));
  }

  // The bucket: tokens now of its burst.
  function tokens(q) {
    if (q.rate === null) return dash();
    return h('span', { class: 'num', title: 'starts the rate allows now, of a bucket of ' + q.burst }, `${q.tokens} / ${q.burst}`);
  }

  function row(q) {
    return h('tr', null,
      h('td', null, h('strong', { class: 'mono' }, q.name), q.worker ? [' ', h('span', { class: 'qtag', title: 'outside workers run its steps' }, 'workers')] : null),
      h('td', { class: 'num' }, String(q.ready)),
      h('td', null, inProgress(q)),
      h('td', { class: 'num' }, String(q.scheduled)),
      h('td', { class: 'num' }, q.rate === null ? dash() : h('span', { title: `${q.rate_per_second} per second` }, q.rate)),
      h('td', null, tokens(q)),
      h('td', { class: 'num' }, q.oldest_ready_age_ms === null ? dash()
        : h('span', { class: q.oldest_ready_age_ms >= 60000 ? 'qlate' : null, title: 'ready since ' + TK.fmtAbs(q.oldest_ready_at) }, TK.fmtDur(q.oldest_ready_age_ms))),
      h('td', { class: 'num' }, q.worker ? String(q.workers_seen) : dash()));
  }

  TK.views.queues = function () {
    const list = h('div');
    const el = h('div', { class: 'page' }, h('h1', null, 'Queues'),
      h('p', { class: 'muted' }, 'A step names its queue with ', h('code', null, 'queue = "NAME"'), ' (a worker step: its handler’s). ',
        h('code', null, '[queues.NAME]'), ' in the configuration limits how many of its steps are in progress anywhere (concurrency) and how fast they start (rate), for every orchestrator and worker.'),
      h('section', { class: 'card' }, list));
    const refresh = async function () {
      const qs = await TK.apiInto(list, '/queues');
      TK.swap(list, qs, () => table(['queue', 'ready', 'in progress / limit', 'scheduled', 'rate', 'tokens', 'oldest waiting', 'workers (1 min)'],
        (qs || []).map(row), 'No queues yet: a step names one with queue = "NAME", or a worker handler with { kind = "worker", queue = "NAME" }.'));
    };
    return { el, refresh, title: 'Queues' };
  };
})();
