// A host's page: its numbers, politeness now, its robots.txt, its latest fetches.

import { emptyRow, h, num, percent, seconds, section, table, timeEl } from '../dom.js';

const REFRESH_MS = 3000;

function facts(report) {
  const pairs = [['Fetched', num(report.fetched)], ['Queued', num(report.queued)],
    ['Errors', num(report.errors)], ['Error rate', percent(report.error_rate)],
    ['Mean response', seconds(report.mean_response_s)], ['Interval', seconds(report.interval_s)],
    ['Back-off', report.politeness?.backoff_s ? seconds(report.politeness.backoff_s) : 'none'],
    ['Failures in a row', num(report.politeness?.failures)],
    ['Next request allowed', timeEl(report.politeness?.next_allowed_at)]];
  return h('dl', { class: 'facts' }, pairs.map(([t, v]) => [h('dt', {}, t), h('dd', {}, v)]));
}

function robotsList(robots) {
  if (!robots.length) return h('p', {}, 'No robots.txt fetched yet.');
  return h('ul', { class: 'plain' }, robots.map((one) => h('li', {},
    h('dl', { class: 'facts' },
      h('dt', {}, 'robots.txt'), h('dd', { class: 'url' }, one.robots_url),
      h('dt', {}, 'Answer'), h('dd', {}, one.error ? `error: ${one.error}` : num(one.status)),
      h('dt', {}, 'Crawl-delay'), h('dd', {}, one.crawl_delay === null ? 'none' : `${one.crawl_delay} s`),
      h('dt', {}, 'Fetched'), h('dd', {}, timeEl(one.fetched_at))),
    one.text === null || one.text === undefined ? null
      : h('pre', { class: 'robots-text', 'data-testid': 'robots-text' }, one.text))));
}

export function mountHost(ctx, host, jobParam) {
  const notice = h('p', { class: 'notice', role: 'status' });
  const numbers = h('div', { class: 'panel' });
  const robots = h('div', { 'data-testid': 'host-robots' });
  const fetches = table('host-fetches', ['URL', 'Status', 'Took', 'Fetched'], 'Latest fetches');
  ctx.main.append(h('p', {}, h('a', { href: '#/hosts' }, '← All hosts')), h('h1', {}, host),
    notice, numbers, section('robots.txt', robots), section('Latest fetches', fetches.box));
  let jobId = jobParam;

  async function load() {
    try {
      const report = await ctx.client.call(`/api/v1/hosts/${encodeURIComponent(host)}`,
        { query: { job: jobId } });
      jobId = report.job;
      numbers.replaceChildren(h('p', {}, 'Job ', h('a', { href: `#/jobs/${encodeURIComponent(jobId)}` }, jobId)),
        facts(report));
      robots.replaceChildren(robotsList(report.robots));
      const pages = await ctx.client.call(`/api/v1/jobs/${encodeURIComponent(jobId)}/pages`,
        { query: { host, order: 'desc', limit: 20 } });
      if (!pages.pages.length) emptyRow(fetches.body, 4, 'No fetch yet.');
      else fetches.body.replaceChildren(...pages.pages.map((row) => h('tr', {},
        h('td', { class: 'url' }, h('a', { href: `#/urls?url=${encodeURIComponent(row.url)}&job=${encodeURIComponent(jobId)}` }, row.url)),
        h('td', {}, row.error ? `${num(row.status)} · ${row.error}` : num(row.status)),
        h('td', {}, seconds(row.fetch_duration_s)), h('td', {}, timeEl(row.fetched_at)))));
      notice.textContent = '';
    } catch (error) {
      notice.textContent = error.message;
    }
  }

  load();
  const timer = setInterval(load, REFRESH_MS);
  return { unmount: () => clearInterval(timer) };
}
