// Hosts: a job's busiest, slowest and most failing hosts; a host's own page.

import { emptyRow, h, num, percent, seconds, section, table } from '../dom.js';
import { mountHost } from './host.js';

const REFRESH_MS = 3000;
const TOP = 10;
const TABLES = [
  ['hosts-busiest', 'Busiest', 'fetched'],
  ['hosts-slowest', 'Slowest', 'mean_response_s'],
  ['hosts-failing', 'Most failing', 'error_rate'],
];
const HEADINGS = ['Host', 'Fetched', 'Queued', 'Errors', 'Error rate', 'Mean response',
  'Interval', 'Back-off', 'robots.txt'];

export function robotsText(robots) {
  if (robots === undefined) return '—';
  if (robots === null) return 'not fetched';
  if (robots.error) return `error: ${robots.error}`;
  const delay = robots.crawl_delay !== null && robots.crawl_delay !== undefined
    ? ` · Crawl-delay ${robots.crawl_delay} s` : '';
  return `${robots.status ?? '—'}${delay}`;
}

function hostRow(row, jobId) {
  const href = `#/hosts/${encodeURIComponent(row.host)}?job=${encodeURIComponent(jobId)}`;
  return h('tr', { 'data-host': row.host },
    h('th', { scope: 'row' }, h('a', { href }, row.host)),
    h('td', {}, num(row.fetched)), h('td', {}, num(row.queued)), h('td', {}, num(row.errors)),
    h('td', {}, percent(row.error_rate)), h('td', {}, seconds(row.mean_response_s)),
    h('td', {}, seconds(row.interval_s)), h('td', {}, row.backoff_s ? seconds(row.backoff_s) : 'none'),
    h('td', {}, robotsText(row.robots)));
}

function mountList(ctx, route) {
  const chooser = h('select', { id: 'hosts-job' });
  const notice = h('p', { class: 'notice', role: 'status' });
  const tables = TABLES.map(([testid, title, sort]) => ({ sort, title, ...table(testid, HEADINGS) }));
  ctx.main.append(h('h1', {}, 'Hosts'),
    h('div', { class: 'filters' }, h('label', { for: 'hosts-job' }, 'Job'), chooser), notice,
    h('div', { class: 'host-tables' }, tables.map((one) => section(one.title, one.box))));
  let jobId = route.query.get('job') || '';

  function syncJobs(jobs) {
    const ids = jobs.map((job) => job.id);
    const have = [...chooser.options].map((option) => option.value);
    if (ids.join() !== have.join()) {
      chooser.replaceChildren(...ids.map((id) => h('option', { value: id }, id)));
    }
    if (!jobId || !ids.includes(jobId)) jobId = ids[0] || '';
    chooser.value = jobId;
  }

  async function load() {
    if (!jobId) {
      for (const one of tables) emptyRow(one.body, HEADINGS.length, 'No job yet.');
      return;
    }
    try {
      const answers = await Promise.all(tables.map((one) => ctx.client.call('/api/v1/hosts',
        { query: { job: jobId, sort: one.sort, limit: TOP } })));
      tables.forEach((one, i) => {
        const rows = answers[i].hosts;
        if (!rows.length) emptyRow(one.body, HEADINGS.length, 'No host yet.');
        else one.body.replaceChildren(...rows.map((row) => hostRow(row, jobId)));
      });
      notice.textContent = '';
    } catch (error) {
      notice.textContent = error.message;
    }
  }

  chooser.addEventListener('change', () => {
    jobId = chooser.value;
    history.replaceState(null, '', `#/hosts?job=${encodeURIComponent(jobId)}`);
    load();
  });
  ctx.client.call('/api/v1/jobs', { query: { limit: 100 } }).then((answer) => {
    syncJobs(answer.jobs);
    load();
  }).catch((error) => { notice.textContent = error.message; });
  const timer = setInterval(load, REFRESH_MS);
  return {
    update(snapshot) {
      syncJobs(snapshot.jobs || []);
    },
    unmount() {
      clearInterval(timer);
    },
  };
}

export function mount(ctx, route) {
  return route.rest[0] ? mountHost(ctx, route.rest[0], route.query.get('job')) : mountList(ctx, route);
}
