// Errors: the live feed of failed fetches, filtered by error code and host.

import { h, num, table, timeEl } from '../dom.js';

export function mount(ctx) {
  const code = h('select', { id: 'error-code' }, h('option', { value: '' }, 'all codes'));
  const host = h('input', { id: 'error-host', type: 'search', placeholder: 'host contains…',
    autocomplete: 'off' });
  const count = h('p', { class: 'notice', role: 'status' });
  const { box, body } = table('errors-feed', ['When', 'Job', 'Host', 'URL', 'Error', 'Status'],
    'Failed fetches, newest first');
  const filters = h('div', { class: 'filters' },
    h('label', { for: 'error-code' }, 'Error code'), code,
    h('label', { for: 'error-host' }, 'Host'), host);
  ctx.main.append(h('h1', {}, 'Errors'), filters, count, h('div', { class: 'panel' }, box));
  let latest = [];
  let shownKey = null;

  function syncCodes(errors) {
    const known = new Set([...code.options].map((option) => option.value));
    for (const name of [...new Set(errors.map((row) => row.error))].sort()) {
      if (!known.has(name)) code.append(h('option', { value: name }, name));
    }
  }

  function render() {
    const wantedHost = host.value.trim().toLowerCase();
    const shown = latest.filter((row) => (!code.value || row.error === code.value)
      && (!wantedHost || (row.host || '').toLowerCase().includes(wantedHost)));
    count.textContent = `${num(shown.length)} of the latest ${num(latest.length)} errors`;
    const key = JSON.stringify(shown);
    if (key === shownKey) return; // unchanged: keep the rows (and a focused link) as they are
    shownKey = key;
    body.replaceChildren(...shown.map((row) => h('tr', { 'data-error': row.error },
      h('td', {}, timeEl(row.fetched_at)),
      h('td', {}, h('a', { href: `#/jobs/${encodeURIComponent(row.job)}` }, row.job)),
      h('td', {}, row.host ?? '—'),
      h('td', { class: 'url' }, h('a', { href: `#/urls?url=${encodeURIComponent(row.url)}&job=${encodeURIComponent(row.job)}` }, row.url)),
      h('td', {}, h('code', {}, row.error)),
      h('td', {}, num(row.status)))));
  }

  code.addEventListener('change', render);
  host.addEventListener('input', render);
  return {
    update(snapshot) {
      latest = snapshot.errors || [];
      syncCodes(latest);
      render();
    },
  };
}
