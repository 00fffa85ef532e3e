// A job's page: its numbers, options, timestamps, controls and latest errors.

import { emptyRow, h, num, section, setText, table, timeEl } from '../dom.js';
import {
  ROW_ACTIONS, jobControls, progressBar, setFields, setProgress,
} from './jobcontrols.js';

const ERRORS_EVERY_MS = 3000;

function dl(pairs) {
  return h('dl', { class: 'tiles' }, pairs.map(([term, value]) => h('div', {},
    h('dt', {}, term), h('dd', {}, value))));
}

function optionText(value) {
  if (Array.isArray(value)) return value.length ? value.join(', ') : '—';
  if (value === null || value === undefined) return '—';
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

export function mountDetail(ctx, jobId) {
  const notice = h('p', { class: 'notice', role: 'status' });
  const detail = h('div', { 'data-testid': 'job-detail' }, h('p', {}, 'Loading…'));
  ctx.main.append(h('p', {}, h('a', { href: '#/jobs' }, '← All jobs')),
    h('h1', {}, `Job ${jobId}`), notice, detail);
  let view = null;
  let timer = null;

  function build(job) {
    const cells = Object.fromEntries(['state', 'pages', 'queue', 'rate', 'eta', 'errors']
      .map((name) => [name, h('span', { 'data-field': name })]));
    const times = Object.fromEntries(['created_at', 'started_at', 'finished_at']
      .map((name) => [name, h('span', {})]));
    const controls = jobControls(ctx, jobId, (changed) => apply(changed, Date.now() / 1000),
      (text) => setText(notice, text), [...ROW_ACTIONS, 'recrawl']);
    const bar = progressBar(job);
    const errors = table('job-errors', ['URL', 'Error', 'Status', 'When'], 'Latest errors');
    const options = Object.entries(job.options || {}).sort(([a], [b]) => a.localeCompare(b));
    detail.replaceChildren(
      h('div', { class: 'panel' }, controls.el, h('div', { class: 'wide-progress' }, bar),
        dl([['State', cells.state], ['Pages', cells.pages], ['Queue', cells.queue],
          ['Errors', cells.errors], ['Rate', cells.rate], ['ETA', cells.eta],
          ['Created', times.created_at], ['Started', times.started_at],
          ['Finished', times.finished_at]])),
      section('Options', dl(options.map(([k, v]) => [k, optionText(v)]))),
      section('Latest errors', errors.box),
    );
    view = { cells, times, controls, bar, errors };
  }

  function apply(job, now) {
    if (!view) build(job);
    setFields(view.cells, job, now);
    setProgress(view.bar, job);
    view.controls.refresh(job);
    for (const [name, el] of Object.entries(view.times)) el.replaceChildren(timeEl(job[name]));
  }

  async function loadErrors() {
    if (!view) return;
    try {
      const answer = await ctx.client.call(`/api/v1/jobs/${encodeURIComponent(jobId)}/errors`,
        { query: { limit: 20 } });
      if (!answer.errors.length) emptyRow(view.errors.body, 4, 'No errors.');
      else view.errors.body.replaceChildren(...answer.errors.map((row) => h('tr', {},
        h('td', { class: 'url' }, h('a', { href: `#/urls?url=${encodeURIComponent(row.url)}&job=${encodeURIComponent(jobId)}` }, row.url)),
        h('td', {}, row.error), h('td', {}, num(row.status)), h('td', {}, timeEl(row.fetched_at)))));
    } catch (error) {
      setText(notice, error.message);
    }
  }

  ctx.client.call(`/api/v1/jobs/${encodeURIComponent(jobId)}`)
    .then((job) => {
      apply(job, Date.now() / 1000);
      loadErrors();
    })
    .catch((error) => detail.replaceChildren(h('p', { class: 'problem' }, error.message)));
  timer = setInterval(loadErrors, ERRORS_EVERY_MS);
  return {
    update(snapshot) {
      const job = (snapshot.jobs || []).find((one) => one.id === jobId);
      if (job) apply(job, snapshot.at);
    },
    unmount() {
      clearInterval(timer);
    },
  };
}
