/* The backoff explorer: a profile's (or a policy's) delay before each
 * retry, with the jitter band. */
'use strict';
(function () {
  const TK = window.TK;
  const { h, table, field } = TK;

  const JITTERS = ['none', 'proportional', 'full', 'equal', 'decorrelated'];

  // A policy in words: what a reader checks first.
  function policyText(name, p) {
    const parts = [];
    if (Array.isArray(p.schedule_ms) && p.schedule_ms.length) parts.push('schedule ' + p.schedule_ms.map(TK.fmtDur).join(', '));
    if (p.base_ms !== undefined) parts.push('base ' + TK.fmtDur(p.base_ms));
    if (p.multiplier !== undefined) parts.push('×' + p.multiplier + ' per failure');
    if (p.max_delay_ms !== undefined) parts.push('cap ' + TK.fmtDur(p.max_delay_ms));
    if (p.min_delay_ms) parts.push('floor ' + TK.fmtDur(p.min_delay_ms));
    if (p.jitter) parts.push('jitter ' + p.jitter + (p.jitter === 'proportional' && p.jitter_fraction !== undefined ? ' ±' + Math.round(p.jitter_fraction * 100) + '%' : ''));
    if (p.max_server_delay_ms !== undefined) parts.push('server delays up to ' + TK.fmtDur(p.max_server_delay_ms));
    return [h('strong', null, name ? 'Profile ' + name + ': ' : 'Policy: '), parts.join(' · ')];
  }

  TK.views.backoff = function (params) {
    const q = params.q;
    const custom = q.get('mode') === 'custom';
    const profile = h('select', { name: 'profile' }, h('option', { value: q.get('profile') || 'default' }, q.get('profile') || 'default'));
    // Empty fields keep the profile's values, shown as their placeholders.
    const base = h('input', { name: 'base', value: q.get('base') || '', size: 7 });
    const mult = h('input', { name: 'multiplier', value: q.get('multiplier') || '', size: 5 });
    const cap = h('input', { name: 'cap', value: q.get('cap') || '', size: 7 });
    const form = TK.hashForm('backoff',
    h('fieldset', { class: 'mode' },
      h('label', { class: 'check' }, h('input', { type: 'radio', name: 'mode', value: 'profile', checked: !custom }), 'a configured profile'),
      h('label', { class: 'check' }, h('input', { type: 'radio', name: 'mode', value: 'custom', checked: custom }), 'a policy of my own')),
    field('profile', profile),
    field('base', base),
    field('multiplier', mult),
    field('cap', cap),
    field('jitter', h('select', { name: 'jitter' }, h('option', { value: '' }, '(profile’s)'),
      JITTERS.map((j) => h('option', { value: j, selected: q.get('jitter') === j }, j)))),
    field('retries', h('input', { name: 'attempts', type: 'number', min: 1, max: 100, value: q.get('attempts') || '10', size: 4 })),
    field('scale', h('select', { name: 'scale' }, h('option', { value: '' }, 'linear'), h('option', { value: 'log', selected: q.get('scale') === 'log' }, 'logarithmic'))),
    h('div', { class: 'filter-buttons' }, h('button', { type: 'submit', class: 'primary' }, 'Plot')));
    const chart = h('div', { class: 'chart-box wide' }), rows = h('div'), err = h('div');
    const el = h('div', { class: 'page' }, h('h1', null, 'Backoff explorer'),
      h('p', { class: 'muted' }, 'The delay before each retry: the shaded band is where jitter puts it (min to max), the line its median, the dashed line the delay before jitter.'),
      form, err,
      h('section', { class: 'card' }, TK.legend([['sw-band', 'jitter band (min..max)'], ['sw-line src-median', 'median'], ['sw-line src-capped', 'before jitter']]), chart),
      h('section', { class: 'card' }, rows));
    const refresh = async function () {
      const p = { attempts: q.get('attempts') || 10, profile: q.get('profile') || null };
      if (custom) for (const k of ['base', 'multiplier', 'cap', 'jitter']) p[k] = q.get(k);
      let r;
      try {
        r = await TK.api('/backoff' + TK.qs(p));
      } catch (e) {
        TK.swap(err, e.message, () => TK.errorBox(e));
        return;
      }
      TK.swap(err, null, () => h('span'));
      if (Array.isArray(r.profiles) && profile.tkLast !== r.profiles.join()) {
        profile.tkLast = r.profiles.join();
        const want = q.get('profile') || r.profile || 'default';
        profile.replaceChildren(...r.profiles.map((n) => h('option', { value: n, selected: n === want }, n)));
      }
      const pol = r.policy || {};
      if (pol.base_ms !== undefined) base.setAttribute('placeholder', TK.fmtDur(pol.base_ms));
      if (pol.multiplier !== undefined) mult.setAttribute('placeholder', String(pol.multiplier));
      if (pol.max_delay_ms !== undefined) cap.setAttribute('placeholder', TK.fmtDur(pol.max_delay_ms));
      TK.swap(chart, r.delays, () => TK.backoffChart(r.delays, q.get('scale') === 'log'));
      TK.swap(rows, [r.delays, r.policy], () => h('div', null,
        r.policy ? h('p', { class: 'policy' }, policyText(r.profile, r.policy)) : null,
        table(['after failure', 'before jitter', 'min', 'median', 'max', 'total wait (median)'], (() => {
          let sum = 0;
          return r.delays.map((d) => {
            sum += d.median_ms;
            return h('tr', null, h('td', { class: 'num' }, '#' + d.attempt), h('td', { class: 'num' }, TK.fmtDur(d.capped_ms)),
              h('td', { class: 'num' }, TK.fmtDur(d.min_ms)), h('td', { class: 'num' }, TK.fmtDur(d.median_ms)),
              h('td', { class: 'num' }, TK.fmtDur(d.max_ms)), h('td', { class: 'num' }, TK.fmtDur(sum)));
          });
        })(), 'No delays.')));
    };
    return { el, refresh, title: 'Backoff explorer' };
  };
})();
