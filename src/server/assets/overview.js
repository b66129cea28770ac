/* The overview: counts by state, the last hour's activity, the latest
 * failed steps. */
'use strict';
(function () {
  const TK = window.TK;
  const { h, settle, failedTable } = TK;

  // Counts by state as chips, in the given order, then any other state.
  function counts(byState, order) {
    const states = order.concat(Object.keys(byState || {}).filter((k) => !order.includes(k)));
    const total = states.reduce((a, k) => a + ((byState || {})[k] || 0), 0);
    const bar = h('div', { class: 'stackbar' }, states.filter((k) => (byState || {})[k]).map((k) =>
      h('span', { class: 'seg sw-st-' + k, style: { flexGrow: String(byState[k]) }, title: `${TK.stateLabel(k)}: ${byState[k]}` })));
    return h('div', null,
      h('div', { class: 'total' }, String(total)),
      total ? bar : h('div', { class: 'stackbar empty' }),
      h('ul', { class: 'counts' }, states.map((k) => {
        const n = (byState || {})[k] || 0;
        return h('li', { class: n ? '' : 'zero' }, h('span', { class: 'swatch sw-st-' + k }), h('span', { class: 'count-label' }, TK.stateLabel(k)), h('span', { class: 'count' }, String(n)));
      })));
  }


  TK.views.overview = function () {
    const taskCounts = h('div'), stepCounts = h('div'), facts = h('div');
    const thr = h('div', { class: 'chart-box' }), late = h('div', { class: 'chart-box' });
    const recent = h('div'), err = h('div');
    const el = h('div', { class: 'page' },
      h('h1', null, 'Overview'), err,
      h('div', { class: 'cards3' },
        h('section', { class: 'card' }, h('h2', null, 'Tasks'), taskCounts),
        h('section', { class: 'card' }, h('h2', null, 'Steps'), stepCounts),
        h('section', { class: 'card' }, h('h2', null, 'Now'), facts)),
      h('div', { class: 'cards2' },
        h('section', { class: 'card' }, h('h2', null, 'Throughput, last hour'),
          TK.legend([['sw-oc-success', 'succeeded'], ['sw-oc-failure', 'failed'], ['sw-line src-retries', 'retries']]), thr),
        h('section', { class: 'card' }, h('h2', null, 'Retry lateness, last hour'),
          TK.legend([['sw-lateness', 'average'], ['sw-line src-latemax', 'maximum']]), late)),
      h('section', { class: 'card' }, h('h2', null, 'Latest failed steps ', h('a', { href: '#/failed', class: 'more' }, 'all failed →')), recent));
    const refresh = async function () {
      const [st, act, fail] = await settle([TK.api('/status'), TK.api('/activity?window=1h&bucket=1m'), TK.api('/steps?state=error&limit=5')]);
      const errs = [st, act, fail].filter((r) => r.e).map((r) => r.e.message);
      TK.swap(err, errs, () => h('div', null, errs.map((m) => TK.flashBox('error', m))));
      if (st.v) {
        if (st.v.now) TK.clockOffset = st.v.now - Date.now();
        TK.swap(taskCounts, st.v.tasks, () => counts(st.v.tasks, TK.TASK_STATES));
        TK.swap(stepCounts, st.v.steps, () => counts(st.v.steps, TK.STEP_STATES));
        TK.swap(facts, [st.v.ready_now, st.v.next_due_at, st.v.backend, st.v.counters, st.v.as_of], () => h('dl', { class: 'facts' },
          h('dt', null, 'ready to run'), h('dd', null, String(st.v.ready_now ?? '–')),
          h('dt', null, 'next retry due'), h('dd', null, TK.time(st.v.next_due_at)),
          h('dt', null, 'store'), h('dd', null, st.v.backend || '–'),
          st.v.as_of ? [h('dt', null, 'counted'), h('dd', null, TK.time(st.v.as_of))] : null,
          Object.keys(st.v.counters || {}).map((k) => [h('dt', null, k.replace(/_/g, ' ')), h('dd', null, String(st.v.counters[k]))])));
      }
      if (act.v) {
        TK.swap(thr, act.v, () => TK.throughputChart(act.v));
        TK.swap(late, act.v, () => TK.latenessChart(act.v));
      }
      if (fail.v) TK.swap(recent, fail.v.steps, () => failedTable(fail.v.steps, null));
    };
    return { el, refresh, title: 'Overview' };
  };
})();
