// Overview: the crawler's numbers now, pages/s over 10 minutes, responses by status class.

import { bin, draw } from '../charts.js';
import { bytes, h, num, percent, s, setText } from '../dom.js';

const BIN_S = 10;
const CLASSES = [
  ['2xx', 'c2xx'], ['3xx', 'c3xx'], ['4xx', 'c4xx'], ['5xx', 'c5xx'], ['1xx', 'c1xx'],
  ['none', 'cnone'],
];
const CARDS = [
  ['pages-per-s', 'pages/s now'],
  ['pages-total', 'pages stored'],
  ['queue-size', 'URLs queued'],
  ['errors-total', 'errors, all jobs'],
  ['error-rate', 'error rate, last hour'],
  ['bandwidth', 'bandwidth'],
  ['workers-active', 'workers active'],
];

/** Bytes a second: the series' own when the server gives it, else from storage growth. */
function bandwidth(snapshot, previous) {
  const series = snapshot.series || {};
  if (Array.isArray(series.bytes) && series.bytes.length >= BIN_S + 1) {
    const recent = series.bytes.slice(-BIN_S - 1, -1); // the current second is still filling
    return recent.reduce((a, b) => a + b, 0) / BIN_S;
  }
  if (!previous || snapshot.at <= previous.at) return null;
  const grown = (snapshot.stats.storage.bytes ?? 0) - (previous.stats.storage.bytes ?? 0);
  return Math.max(grown, 0) / (snapshot.at - previous.at);
}

export function mount(ctx) {
  const values = {};
  const cards = h('div', { class: 'cards' }, CARDS.map(([id, label]) => {
    values[id] = h('span', { class: 'value', 'data-testid': id }, '—');
    return h('div', { class: 'card' }, values[id], h('span', { class: 'label' }, label));
  }));
  const throughput = s('svg', { class: 'chart', 'data-testid': 'throughput-chart' });
  const statuses = s('svg', { class: 'chart', 'data-testid': 'status-chart' });
  const legend = h('ul', { class: 'legend' },
    CLASSES.map(([name, cls]) => h('li', {}, h('span', { class: `swatch ${cls}` }), name)));
  const jobStates = h('p', { class: 'notice', 'data-testid': 'jobs-by-state' });
  ctx.main.append(
    h('h1', {}, 'Overview'),
    cards,
    jobStates,
    h('div', { class: 'charts' },
      h('figure', { class: 'panel' }, h('figcaption', {}, 'Pages per second, last 10 minutes'),
        throughput),
      h('figure', { class: 'panel' },
        h('figcaption', {}, 'Responses by status class, last 10 minutes'), statuses, legend)),
  );
  let previous = null;
  let smoothed = null;

  function update(snapshot) {
    const { stats, series, jobs } = snapshot;
    setText(values['pages-per-s'], num(stats.throughput.now));
    setText(values['pages-total'], num(stats.storage.pages));
    setText(values['queue-size'], num(stats.queue.pending));
    setText(values['errors-total'], num((jobs || []).reduce((sum, job) => sum + job.errors, 0)));
    setText(values['error-rate'], percent(stats.errors.rate));
    const rate = bandwidth(snapshot, previous);
    if (rate !== null) smoothed = smoothed === null ? rate : 0.7 * smoothed + 0.3 * rate;
    setText(values.bandwidth, smoothed === null ? '—' : `${bytes(smoothed)}/s`);
    setText(values['workers-active'], `${num(stats.workers.active)} / ${num(stats.workers.total)}`);
    const states = Object.entries(stats.jobs || {}).filter(([, count]) => count);
    setText(jobStates, states.length
      ? `Jobs: ${states.map(([state, count]) => `${num(count)} ${state}`).join(' · ')}`
      : 'No job yet.');
    previous = snapshot;
    drawCharts(series);
  }

  function drawCharts(series) {
    if (!series || !series.pages) return;
    const spanS = series.pages.length * series.step_s;
    draw(throughput, [{ name: 'pages/s', cls: 'c2xx', values: bin(series.pages, BIN_S) }],
      { spanS, unit: 'pages/s', label: 'Pages per second over the last 10 minutes' });
    const classes = series.status_classes || {};
    draw(statuses, CLASSES.filter(([name]) => classes[name]).map(([name, cls]) => (
      { name, cls, values: bin(classes[name], BIN_S) })),
    { spanS, unit: 'responses/s', stacked: true,
      label: 'Responses per second by status class over the last 10 minutes' });
  }

  return { update };
}
