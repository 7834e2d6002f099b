// A server-sent-events reader over fetch: unlike EventSource it can send
// Last-Event-ID on the first connect too, it sees the HTTP status (401:
// signed out; 503: the daemon is draining or restarting) and it keeps
// reconnecting, with the last id it saw, for as long as the page wants.

export class EventStream {
  // url: the feed; opts.lastEventId: the cursor to resume after;
  // opts.onEvent(name, data, id); opts.onState('live'|'reconnecting'|'closed', detail).
  constructor(url, opts) {
    this.url = url;
    this.lastEventId = opts.lastEventId || '';
    this.onEvent = opts.onEvent;
    this.onState = opts.onState || (() => {});
    this.retry = 1000;
    this.closed = false;
    this.ctrl = null;
    this.reconnects = 0;
  }

  start() {
    this.loop();
    return this;
  }

  close() {
    this.closed = true;
    this.ctrl?.abort();
    this.onState('closed');
  }

  async loop() {
    let failures = 0;
    while (!this.closed) {
      let reason = 'ended';
      try {
        await this.connect();
        failures = 0;
      } catch (err) {
        if (this.closed) return;
        if (err?.fatal) {
          this.onState('closed', err.message);
          return;
        }
        reason = err?.message || 'network error';
        failures++;
      }
      if (this.closed) return;
      this.reconnects++;
      this.onState('reconnecting', reason);
      const wait = Math.min(this.retry * Math.pow(2, Math.min(failures, 3)), 8000);
      await new Promise((r) => setTimeout(r, failures ? wait : this.retry));
    }
  }

  async connect() {
    this.ctrl = new AbortController();
    const headers = { Accept: 'text/event-stream' };
    if (this.lastEventId) headers['Last-Event-ID'] = this.lastEventId;
    const res = await fetch(this.url, { headers, credentials: 'same-origin', signal: this.ctrl.signal, cache: 'no-store' });
    if (res.status === 401) {
      location.reload();
      throw Object.assign(new Error('signed out'), { fatal: true });
    }
    if (res.status === 404 || res.status === 400) {
      let msg = `HTTP ${res.status}`;
      try { msg = (await res.json()).error.message; } catch { /* not an envelope */ }
      throw Object.assign(new Error(msg), { fatal: true });
    }
    if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
    this.onState('live');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let ev = { event: '', data: [], id: null };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        if (buf[nl] === '\r' && nl === buf.length - 1) break; // a \r\n may be split
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (ev.id !== null) this.lastEventId = ev.id;
          if (ev.data.length) this.onEvent(ev.event || 'message', ev.data.join('\n'), this.lastEventId);
          ev = { event: '', data: [], id: null };
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        switch (field) {
          case 'event': ev.event = val; break;
          case 'data': ev.data.push(val); break;
          case 'id': if (!val.includes('\0')) ev.id = val; break;
          case 'retry': if (/^\d+$/.test(val)) this.retry = Number(val); break;
        }
      }
    }
  }
}
