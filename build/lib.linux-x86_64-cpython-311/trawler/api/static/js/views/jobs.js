// Jobs: the table (kept row by row, so focus survives the live updates), the create
// form, and a job's own page (#/jobs/ID).

import { emptyRow, h, section, setText, table } from '../dom.js';
import { mountDetail } from './jobdetail.js';
import { jobForm } from './jobform.js';
import { jobControls, progressBar, setFields, setProgress } from './jobcontrols.js';

const FIELDS = ['state', 'pages', 'queue', 'rate', 'eta'];

function jobRow(ctx, job, onJob, onError) {
  const cells = Object.fromEntries(FIELDS.map((name) => [name, h('td', { 'data-field': name })]));
  const controls = jobControls(ctx, job.id, onJob, onError);
  const bar = progressBar(job);
  const tr = h('tr', { 'data-job-id': job.id },
    h('th', { scope: 'row' }, h('a', { href: `#/jobs/${encodeURIComponent(job.id)}` }, job.id)),
    FIELDS.map((name) => cells[name]),
    h('td', {}, bar),
    h('td', {}, controls.el));
  return {
    tr,
    set(next, now) {
      setFields(cells, next, now);
      setProgress(bar, next);
      controls.refresh(next);
      tr.dataset.state = next.state;
    },
  };
}

function mountList(ctx) {
  const notice = h('p', { class: 'notice', role: 'status' });
  const { box, body } = table('jobs-table',
    ['Job', 'State', 'Pages', 'Queue', 'Rate', 'ETA', 'Progress', 'Actions'], 'Jobs, newest first');
  const rows = new Map();
  let latest = [];
  let now = Date.now() / 1000;

  function render(jobs) {
    latest = jobs;
    if (!jobs.length) {
      rows.clear();
      emptyRow(body, 8, 'No job yet: create one below.');
      return;
    }
    const wanted = jobs.map((job) => {
      let row = rows.get(job.id);
      if (!row) {
        row = jobRow(ctx, job, (changed) => {
          setText(notice, '');
          merge(changed);
        }, (text) => setText(notice, text));
        rows.set(job.id, row);
      }
      row.set(job, now);
      return row.tr;
    });
    for (const id of [...rows.keys()]) if (!jobs.some((job) => job.id === id)) rows.delete(id);
    // Re-append only when the order changed: moving a row would drop its focus.
    const same = wanted.length === body.children.length
      && wanted.every((tr, i) => body.children[i] === tr);
    if (!same) body.replaceChildren(...wanted);
  }

  function merge(changed) {
    const others = latest.filter((job) => job.id !== changed.id);
    render([changed, ...others].sort((a, b) => b.created_at - a.created_at));
  }

  const form = jobForm(ctx, (job) => {
    setText(notice, `Job ${job.id} created.`);
    merge(job);
  });
  ctx.main.append(h('h1', {}, 'Jobs'), notice, h('div', { class: 'panel' }, box),
    section('New job', form));
  ctx.client.call('/api/v1/jobs').then((answer) => {
    if (!ctx.snapshot()) render(answer.jobs);
  }).catch((error) => setText(notice, error.message));
  return {
    update(snapshot) {
      now = snapshot.at;
      render(snapshot.jobs || []);
    },
  };
}

export function mount(ctx, route) {
  return route.rest[0] ? mountDetail(ctx, route.rest[0]) : mountList(ctx);
}
