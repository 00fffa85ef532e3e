// Hand-drawn SVG charts of the last minutes: lines, or areas stacked.

import { num, s } from './dom.js';

const W = 640;
const H = 220;
const M = { left: 52, right: 12, top: 12, bottom: 26 };

/** Per-second counts → averages per `bin` seconds (a readable line, not 600 spikes). */
export function bin(values, binS) {
  const out = [];
  for (let i = 0; i + binS <= values.length; i += binS) {
    let sum = 0;
    for (let j = i; j < i + binS; j += 1) sum += values[j];
    out.push(sum / binS);
  }
  return out;
}

/** A maximum for the y axis: 1, 2 or 5 times a power of ten. */
function niceMax(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (value <= step * power) return step * power;
  return 10 * power;
}

function axes(max, spanS, unit) {
  const parts = [];
  const plotW = W - M.left - M.right;
  const plotH = H - M.top - M.bottom;
  for (const fraction of [0, 0.5, 1]) {
    const y = M.top + plotH * (1 - fraction);
    parts.push(s('line', { class: 'grid', x1: M.left, x2: W - M.right, y1: y, y2: y }));
    parts.push(s('text', { class: 'tick', x: M.left - 6, y: y + 4, 'text-anchor': 'end' },
      num(max * fraction)));
  }
  const minutes = spanS / 60;
  for (const fraction of [0, 0.5, 1]) {
    const x = M.left + plotW * fraction;
    const left = Math.round(minutes * (1 - fraction));
    const anchor = fraction === 0 ? 'start' : fraction === 1 ? 'end' : 'middle';
    parts.push(s('text', { class: 'tick', x, y: H - 6, 'text-anchor': anchor },
      left ? `−${left} min` : 'now'));
  }
  parts.push(s('text', { class: 'tick unit', x: M.left, y: M.top - 2 }, unit));
  return parts;
}

function point(i, count, value, max) {
  const x = M.left + ((W - M.left - M.right) * i) / Math.max(count - 1, 1);
  const y = M.top + (H - M.top - M.bottom) * (1 - value / max);
  return `${x.toFixed(1)},${y.toFixed(1)}`;
}

/**
 * Redraws `svg` with `series` ([{name, cls, values}], same lengths) over `spanS`
 * seconds. stacked: areas on top of each other (a total per moment), else lines.
 */
export function draw(svg, series, { spanS, unit, stacked = false, label }) {
  const count = series.length ? series[0].values.length : 0;
  const tops = series.map(() => new Array(count).fill(0));
  let running = new Array(count).fill(0);
  series.forEach((line, k) => {
    const base = stacked ? running : new Array(count).fill(0);
    tops[k] = line.values.map((v, i) => base[i] + v);
    if (stacked) running = tops[k];
  });
  const max = niceMax(Math.max(0, ...tops.flat()));
  const shapes = [];
  series.forEach((line, k) => {
    const top = tops[k].map((v, i) => point(i, count, v, max));
    if (stacked) {
      const below = k ? tops[k - 1] : new Array(count).fill(0);
      const bottom = below.map((v, i) => point(i, count, v, max)).reverse();
      shapes.push(s('polygon', { class: `area ${line.cls}`, points: [...top, ...bottom].join(' ') },
        s('title', {}, line.name)));
    } else {
      shapes.push(s('polyline', { class: `line ${line.cls}`, points: top.join(' ') },
        s('title', {}, line.name)));
    }
  });
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  svg.replaceChildren(s('title', {}, label), ...axes(max, spanS, unit), ...shapes);
}
