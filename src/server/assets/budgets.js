/* The retry budgets (DESIGN §14): each state the store keeps (a budget's,
 * or with per_host one per destination host), shared by every
 * orchestrator: its figures, the retries it allows now, the deferred
 * retries waiting for the times it reserved, and its counts, as
 * GET /api/v1/budgets reports them (the report `tasker budgets` prints). */
'use strict';
(function () {
  const TK = window.TK;
  const { h, table } = TK;

  const dash = () => h('span', { class: 'muted' }, '–');

  // "0.1 × first attempts + 0.5/s over 10s": the rule of docs/retry.md.
  function figures(b) {
    if (b.ratio === null) return dash();
    return h('span', { class: 'mono', title: `retries in any ${TK.fmtDur(b.window_ms)} window may be at most ${b.ratio} per first attempt in it, plus ${b.min_per_second} per second` },
      `${b.ratio} × firsts + ${b.min_per_second}/s per ${TK.fmtDur(b.window_ms)}`);
  }

  // Retries allowed now; with none, when the next one is.
  function left(b) {
    if (b.available === null) return dash();
    if (b.available > 0) return h('span', { class: 'num' }, String(b.available));
    return h('span', { class: 'qlate' }, '0', b.next_retry_at === null ? null : [' · next ', TK.time(b.next_retry_at)]);
  }

  function reserved(b) {
    if (!b.reserved) return h('span', { class: 'num' }, '0');
    return h('span', { class: 'num' }, String(b.reserved), b.reserved_until === null ? null : [' until ', TK.time(b.reserved_until)]);
  }

  function row(b) {
    return h('tr', null,
      h('td', null, h('strong', { class: 'mono' }, b.name), b.configured === false ? [' ', h('span', { class: 'qtag', title: 'not in the server’s configuration: the figures an orchestrator last applied' }, 'not configured')] : null),
      h('td', null, b.host === null ? h('span', { class: 'muted', title: b.per_host ? 'attempts that named no host' : 'one state for every step naming it' }, b.per_host ? 'no host' : 'shared') : h('span', { class: 'mono' }, b.host)),
      h('td', null, figures(b)),
      h('td', null, left(b)),
      h('td', null, reserved(b)),
      h('td', { class: 'num' }, String(b.deferred)),
      h('td', { class: 'num' }, String(b.brought_earlier)),
      h('td', { class: 'num', title: 'first attempts / retries counted since the state began' }, `${b.first_attempts} / ${b.retries}`),
      h('td', null, TK.time(b.updated_at)));
  }

  TK.views.budgets = function () {
    const list = h('div');
    const el = h('div', { class: 'page' }, h('h1', null, 'Retry budgets'),
      h('p', { class: 'muted' }, 'A step names a budget with ', h('code', null, 'retry = { budget = "NAME" }'), '; ',
        h('code', null, '[budgets.NAME]'), ' bounds its retries to a share of its first attempts plus a floor, over a sliding window, for every orchestrator together. A retry over the budget is deferred to the time it allows, never failed.'),
      h('section', { class: 'card' }, list));
    const refresh = async function () {
      const bs = await TK.apiInto(list, '/budgets');
      TK.swap(list, bs, () => table(['budget', 'host', 'allows', 'left now', 'reserved', 'deferred', 'brought earlier', 'firsts / retries', 'updated'],
        (bs || []).map(row), 'No retry budget states yet: a budget’s state is stored once a step naming it has run.'));
    };
    return { el, refresh, title: 'Retry budgets' };
  };
})();
