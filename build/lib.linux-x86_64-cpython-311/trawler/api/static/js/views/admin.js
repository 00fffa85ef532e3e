// Admin: the domain blocklist and the politeness overrides of every job.

import { emptyRow, h, section, table, timeEl } from '../dom.js';

function blocklist(ctx) {
  const domain = h('input', { id: 'block-domain', type: 'text', required: true,
    autocomplete: 'off', placeholder: 'example.com' });
  const reason = h('input', { id: 'block-reason', type: 'text', autocomplete: 'off' });
  const notice = h('p', { class: 'notice', role: 'status', 'data-testid': 'blocklist-answer' });
  const { box, body } = table('blocklist', ['Domain', 'Reason', 'Added', '']);
  const form = h('form', { class: 'inline-form', novalidate: true },
    h('label', { for: 'block-domain' }, 'Domain'), domain,
    h('label', { for: 'block-reason' }, 'Reason'), reason,
    h('button', { type: 'submit', id: 'block-add' }, 'Block'));

  async function load() {
    try {
      const entries = await ctx.client.call('/api/v1/admin/blocklist');
      if (!entries.length) emptyRow(body, 4, 'No domain blocked.');
      else body.replaceChildren(...entries.map((entry) => h('tr', { 'data-domain': entry.domain },
        h('th', { scope: 'row' }, entry.domain), h('td', {}, entry.reason || '—'),
        h('td', {}, timeEl(entry.added_at)),
        h('td', {}, h('button', { type: 'button', 'data-action': 'unblock',
          'aria-label': `remove ${entry.domain} from the blocklist`,
          onclick: () => remove(entry.domain) }, 'Remove')))));
    } catch (error) {
      notice.textContent = error.message; // 501: this server has no job runner
    }
  }

  async function remove(name) {
    try {
      await ctx.client.call(`/api/v1/admin/blocklist/${encodeURIComponent(name)}`,
        { method: 'DELETE' });
      notice.textContent = `${name} unblocked.`;
    } catch (error) {
      notice.textContent = error.message;
    }
    load();
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!domain.value.trim()) {
      notice.textContent = 'invalid domain: a domain name is needed';
      domain.focus();
      return;
    }
    try {
      const added = await ctx.client.call('/api/v1/admin/blocklist', { method: 'POST',
        body: { domain: domain.value.trim(), reason: reason.value.trim() } });
      notice.textContent = `${added.domain} blocked.`;
      form.reset();
    } catch (error) {
      notice.textContent = error.message;
    }
    load();
  });
  load();
  return section('Blocklist', h('p', {}, 'No job sends another request to a blocked domain or its subdomains.'),
    form, notice, box);
}

const POLITENESS = [
  ['delay', 'pol-delay', 'Delay between requests to a host (s)', 'any'],
  ['max_crawl_delay', 'pol-max-crawl-delay', 'Ceiling on robots.txt Crawl-delay (s)', 'any'],
  ['concurrency', 'pol-concurrency', 'Requests in flight per job', '1'],
];

function politeness(ctx) {
  const inputs = Object.fromEntries(POLITENESS.map(([name, id, , step]) => [name,
    h('input', { id, name, type: 'number', min: name === 'concurrency' ? 1 : 0, step,
      placeholder: 'each job its own' })]));
  const answer = h('p', { class: 'notice', role: 'status', 'data-testid': 'politeness-answer' });
  const form = h('form', { class: 'job-form', novalidate: true },
    h('div', { class: 'fields' }, POLITENESS.map(([name, id, label]) => h('div', { class: 'field' },
      h('label', { for: id }, label), inputs[name]))),
    h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'pol-save' }, 'Save')), answer);

  function show(settings, prefix) {
    for (const [name, input] of Object.entries(inputs)) input.value = settings[name] ?? '';
    const parts = POLITENESS.map(([name]) => `${name} ${settings[name] ?? 'per job'}`);
    answer.textContent = `${prefix}: ${parts.join(', ')}`;
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const body = {};
    for (const [name, input] of Object.entries(inputs)) {
      body[name] = input.value.trim() === '' ? null : Number(input.value);
    }
    try {
      show(await ctx.client.call('/api/v1/admin/settings/politeness', { method: 'PUT', body }),
        'Applied');
    } catch (error) {
      answer.textContent = error.message;
    }
  });
  ctx.client.call('/api/v1/admin/settings/politeness').then((settings) => show(settings, 'Now'))
    .catch((error) => { answer.textContent = error.message; });
  return section('Politeness, every job', h('p', {}, 'A value set here overrides the option of every running job at once; empty: each job keeps its own.'), form);
}

export function mount(ctx) {
  ctx.main.append(h('h1', {}, 'Admin'), blocklist(ctx), politeness(ctx));
  return {};
}
