// What a job's row and its page share: state-dependent buttons, exports, progress.

import { h, num, seconds, setText } from '../dom.js';

const ALLOWED = {
  pause: ['running'],
  resume: ['paused'],
  cancel: ['pending', 'running', 'paused'],
  recrawl: ['finished', 'cancelled'], // a revisit pass of the stored pages
};
// A job's row has these; its page adds recrawl (a pass is a deliberate act, not a row's).
export const ROW_ACTIONS = ['pause', 'resume', 'cancel'];

/** State-dependent buttons and the two exports; refresh(job) keeps them in step. */
export function jobControls(ctx, jobId, onJob, onError, actions = ROW_ACTIONS) {
  const buttons = actions.map((action) => h('button', {
    type: 'button',
    'data-action': action,
    'aria-label': `${action} job ${jobId}`,
    onclick: async (event) => {
      event.currentTarget.disabled = true;
      try {
        onJob(await ctx.client.call(`/api/v1/jobs/${encodeURIComponent(jobId)}/${action}`,
          { method: 'POST' }));
      } catch (error) {
        onError(error.message);
      }
    },
  }, action));
  const exports = ['jsonl', 'csv'].map((format) => {
    const path = `/api/v1/jobs/${encodeURIComponent(jobId)}/export?format=${format}`;
    return h('a', {
      href: path,
      class: 'button-link',
      'data-action': `export-${format}`,
      'aria-label': `export job ${jobId} as ${format.toUpperCase()}`,
      onclick: async (event) => {
        event.preventDefault(); // the link cannot carry the token: fetch it
        try {
          await ctx.client.download(path, `trawler-${jobId}.${format}`);
        } catch (error) {
          onError(error.message);
        }
      },
    }, format.toUpperCase());
  });
  const el = h('div', { class: 'controls' }, buttons, exports);
  function refresh(job) {
    for (const button of buttons) {
      button.disabled = !ALLOWED[button.dataset.action].includes(job.state);
    }
  }
  return { el, refresh };
}

/** How far a job is: its page budget when it has one, else what it has found so far. */
export function progressOf(job) {
  if (['finished', 'cancelled', 'failed'].includes(job.state)) {
    return { value: job.pages_crawled, max: Math.max(job.pages_crawled, 1) };
  }
  const budget = job.options?.max_pages;
  const found = job.pages_crawled + job.urls_queued;
  const max = Math.max(typeof budget === 'number' ? Math.min(budget, found) : found, 1);
  return { value: Math.min(job.pages_crawled, max), max };
}

export function progressBar(job) {
  const bar = h('progress', { 'aria-label': `progress of job ${job.id}` });
  setProgress(bar, job);
  return bar;
}

export function setProgress(bar, job) {
  const { value, max } = progressOf(job);
  bar.max = max;
  bar.value = value;
  bar.title = `${num(value)} of ${num(max)} pages`;
}

export function eta(job, now) {
  if (job.state === 'finished') return 'done';
  if (job.estimated_completion === null || job.estimated_completion === undefined) return '—';
  return seconds(Math.max(job.estimated_completion - now, 0));
}

export function setFields(cells, job, now) {
  setText(cells.state, job.seeding ? `${job.state} (seeding)` : job.state);
  setText(cells.pages, num(job.pages_crawled));
  setText(cells.queue, num(job.urls_queued));
  setText(cells.rate, `${num(job.pages_per_s)}/s`);
  setText(cells.eta, eta(job, now));
  if (cells.errors) setText(cells.errors, num(job.errors));
}
