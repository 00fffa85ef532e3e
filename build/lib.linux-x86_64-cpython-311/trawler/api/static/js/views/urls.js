// URL analyser: a URL's normalised form, state, fetches, robots verdict and links.

import { emptyRow, h, num, seconds, section, table, timeEl } from '../dom.js';

function fact(testid, term) {
  const value = h('dd', { 'data-testid': testid }, '—');
  return { value, nodes: [h('dt', {}, term), value] };
}

function robotsNodes(robots) {
  if (!robots) return { verdict: 'unknown (no robots.txt of its origin kept)', rule: '—' };
  const verdict = robots.allowed ? 'allowed' : 'disallowed';
  const rule = robots.rule
    ? `${robots.rule}${robots.line ? ` (line ${robots.line})` : ''}`
    : `no rule matched${robots.status ? ` (robots.txt answered ${robots.status})` : ''}`;
  return { verdict, rule };
}

export function mount(ctx, route) {
  const input = h('input', { id: 'url-input', type: 'url', name: 'url', autocomplete: 'off',
    placeholder: 'https://example.com/page' });
  const job = h('input', { id: 'url-job', type: 'text', name: 'job', autocomplete: 'off',
    placeholder: 'newest' });
  const form = h('form', { class: 'search' },
    h('label', { for: 'url-input' }, 'URL'), input,
    h('label', { for: 'url-job' }, 'Job'), job,
    h('button', { type: 'submit' }, 'Analyse'));
  const notice = h('p', { class: 'notice', role: 'status' });
  const facts = {};
  const list = [['url-normalised', 'Normalised'], ['url-state', 'State'], ['url-job', 'Job'],
    ['url-status', 'Status'], ['robots-verdict', 'robots.txt'], ['robots-rule', 'Deciding rule'],
    ['robots-group', 'Group (user-agent)'], ['links-in', 'Links in'],
    ['links-out', 'Links out'], ['url-parent', 'Found on']].map(([id, term]) => {
    facts[id] = fact(id, term);
    return facts[id].nodes;
  });
  const fetches = table('url-fetches', ['Attempt', 'Started', 'Took', 'Status', 'Error',
    'Decision'], 'Fetch history');
  ctx.main.append(h('h1', {}, 'URL analyser'), form, notice,
    section('Verdict', h('dl', { class: 'facts' }, list)), section('Fetches', fetches.box));

  function show(report) {
    const set = (id, value) => facts[id].value.replaceChildren(value ?? '—');
    set('url-normalised', report.url);
    set('url-state', report.skip_reason ? `${report.state} (${report.skip_reason})` : report.state);
    set('url-job', h('a', { href: `#/jobs/${encodeURIComponent(report.job)}` }, report.job));
    set('url-status', report.error ? `${num(report.status)} · ${report.error}` : num(report.status));
    const robots = robotsNodes(report.robots);
    set('robots-verdict', robots.verdict);
    facts['robots-verdict'].value.dataset.verdict = robots.verdict;
    set('robots-rule', robots.rule);
    set('robots-group', report.robots?.group ?? '—');
    set('links-in', num(report.inbound_links));
    set('links-out', report.outbound_links === null ? '—'
      : `${num(report.outbound_links)} on the page, ${num(report.urls_discovered)} new to the crawl`);
    set('url-parent', report.parent_url ? h('a', {
      href: `#/urls?url=${encodeURIComponent(report.parent_url)}&job=${encodeURIComponent(report.job)}`,
    }, report.parent_url) : '—');
    if (!report.fetches.length) emptyRow(fetches.body, 6, 'Never fetched.');
    else fetches.body.replaceChildren(...report.fetches.map((one) => h('tr', {},
      h('td', {}, num(one.attempt)), h('td', {}, timeEl(one.started_at)),
      h('td', {}, seconds(one.duration_s)), h('td', {}, num(one.status)),
      h('td', {}, one.error ?? '—'), h('td', {}, one.decision ?? '—'))));
  }

  async function run(url, jobId) {
    notice.textContent = 'Looking…';
    try {
      show(await ctx.client.call('/api/v1/urls', { query: { url, job: jobId } }));
      notice.textContent = '';
    } catch (error) {
      notice.textContent = error.message;
    }
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const query = new URLSearchParams({ url: input.value.trim() });
    if (job.value.trim()) query.set('job', job.value.trim());
    history.replaceState(null, '', `#/urls?${query}`);
    run(input.value.trim(), job.value.trim());
  });
  const given = route.query.get('url');
  if (given) {
    input.value = given;
    job.value = route.query.get('job') || '';
    run(given, job.value);
  }
  return {};
}
