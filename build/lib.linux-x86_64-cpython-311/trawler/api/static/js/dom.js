// Building the page from server data: text only ever goes in as text nodes or
// attributes, never as HTML (the data is the crawled web's).

const SVG_NS = 'http://www.w3.org/2000/svg';

function fill(el, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'text') {
      el.textContent = String(value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** An HTML element: h('a', {href: '#/x', class: 'y'}, 'text', otherNode). */
export function h(tag, attrs = {}, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element, as h(). */
export function s(tag, attrs = {}, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function setText(el, text) {
  const value = String(text);
  if (el.textContent !== value) el.textContent = value;
}

const INTEGER = new Intl.NumberFormat('en', { maximumFractionDigits: 0 });
const DECIMAL = new Intl.NumberFormat('en', { maximumFractionDigits: 1 });

export function num(value) {
  if (value === null || value === undefined) return '—';
  return Number.isInteger(value) ? INTEGER.format(value) : DECIMAL.format(value);
}

export function percent(ratio) {
  if (ratio === null || ratio === undefined) return '—';
  return `${DECIMAL.format(ratio * 100)} %`;
}

export function bytes(count) {
  if (count === null || count === undefined) return '—';
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let value = count;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${DECIMAL.format(value)} ${units[unit]}`;
}

export function seconds(value) {
  if (value === null || value === undefined) return '—';
  if (value < 1) return `${INTEGER.format(value * 1000)} ms`;
  if (value < 90) return `${DECIMAL.format(value)} s`;
  if (value < 5400) return `${INTEGER.format(value / 60)} min`;
  return `${DECIMAL.format(value / 3600)} h`;
}

/** A Unix time as local date and time. */
export function when(unix) {
  if (unix === null || unix === undefined) return '—';
  return new Date(unix * 1000).toLocaleString();
}

/** A <time> element for a Unix time. */
export function timeEl(unix) {
  if (unix === null || unix === undefined) return document.createTextNode('—');
  return h('time', { datetime: new Date(unix * 1000).toISOString() }, when(unix));
}

/** A table whose body the caller fills; it scrolls inside its own box on a phone. */
export function table(testid, headings, caption) {
  const body = h('tbody');
  const el = h('table', { 'data-testid': testid },
    caption ? h('caption', {}, caption) : null,
    h('thead', {}, h('tr', {}, headings.map((name) => h('th', { scope: 'col' }, name)))),
    body);
  return { box: h('div', { class: 'table-box' }, el), table: el, body };
}

export function emptyRow(body, columns, text) {
  body.replaceChildren(h('tr', {}, h('td', { colspan: columns, class: 'empty' }, text)));
}

export function section(title, ...children) {
  return h('section', { class: 'panel' }, h('h2', {}, title), ...children);
}

/** The hash route's query: '#/urls?url=x&job=y' → URLSearchParams. */
export function hashQuery() {
  const at = location.hash.indexOf('?');
  return new URLSearchParams(at < 0 ? '' : location.hash.slice(at + 1));
}
