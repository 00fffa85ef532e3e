// The live stream: GET /api/v1/events read with fetch (EventSource cannot send the
// token), parsed as server-sent events, reconnected with back-off when it ends.

const BACKOFF_S = [0.5, 1, 2, 4, 8, 15];

/** Splits SSE text into events; returns [events, the unfinished rest]. */
export function parseEvents(text) {
  const events = [];
  const blocks = text.split(/\r?\n\r?\n/);
  const rest = blocks.pop(); // no blank line after it yet
  for (const block of blocks) {
    let name = 'message';
    const data = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith(':')) continue; // a comment: a keep-alive
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') name = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length) events.push({ name, data: data.join('\n') });
  }
  return [events, rest];
}

export class LiveStream {
  /** handlers: snapshot(json), problem(detail), status('live' | 'offline'). */
  constructor(client, handlers) {
    this.client = client;
    this.handlers = handlers;
    this.failures = 0;
  }

  async run() {
    for (;;) {
      try {
        await this.once();
      } catch (error) {
        this.handlers.problem(`live updates interrupted: ${error.message}`);
      }
      this.handlers.status('offline');
      const wait = BACKOFF_S[Math.min(this.failures, BACKOFF_S.length - 1)];
      this.failures += 1;
      await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    }
  }

  async once() {
    const response = await this.client.send('/api/v1/events', {
      headers: { Accept: 'text/event-stream' },
      cache: 'no-store',
    });
    if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      const [events, rest] = parseEvents(buffer + value);
      buffer = rest;
      for (const event of events) this.dispatch(event);
    }
  }

  dispatch(event) {
    let body;
    try {
      body = JSON.parse(event.data);
    } catch {
      return; // not ours to show
    }
    if (event.name === 'snapshot') {
      this.failures = 0;
      this.handlers.status('live');
      this.handlers.snapshot(body);
    } else if (event.name === 'problem') {
      this.handlers.problem(String(body.detail ?? 'the store cannot be read'));
    }
  }
}
