// The JSON API as the pages call it, and the server's clock.

// call sends a request and returns {status, body, retryAfter, sentAt,
// receivedAt}; a network failure is status 0. The token goes in the
// Authorization header only, never in a URL.
export async function call(method, path, { token, body, headers = {} } = {}) {
  const h = { ...headers };
  if (token) h.Authorization = 'Bearer ' + token;
  if (body !== undefined) h['Content-Type'] = 'application/json';
  const sentAt = performance.now();
  let resp;
  try {
    resp = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  } catch {
    return { status: 0, body: null, retryAfter: 0, sentAt, receivedAt: performance.now() };
  }
  const receivedAt = performance.now();
  let data = null;
  try { data = await resp.json(); } catch { /* not JSON */ }
  const ra = parseInt(resp.headers.get('Retry-After') || '', 10);
  return { status: resp.status, body: data, retryAfter: Number.isFinite(ra) && ra > 0 ? ra : 0, sentAt, receivedAt };
}

// errorCode is an error answer's stable code.
export function errorCode(res) {
  return res.body && res.body.error ? res.body.error.code : (res.status === 0 ? 'network' : 'http_' + res.status);
}

export function errorMessage(res) {
  return res.body && res.body.error ? res.body.error.message : errorCode(res);
}

// ServerClock keeps the server's time: a server_time read at the middle
// of its request, moved on by the monotonic performance.now(), so a device
// clock set wrong (or changed) does not start the countdown early or late.
export class ServerClock {
  constructor() { this.base = null; this.rtt = Infinity; }
  // sync takes a server_time; the read with the shortest round trip wins.
  sync(serverTime, sentAt, receivedAt) {
    const ms = Date.parse(serverTime);
    if (!Number.isFinite(ms)) return;
    const rtt = receivedAt - sentAt;
    if (this.base && rtt > this.rtt * 2 + 50) return;
    this.rtt = Math.min(this.rtt, rtt);
    this.base = { server: ms, perf: sentAt + rtt / 2 };
  }
  now() { return this.base ? this.base.server + (performance.now() - this.base.perf) : NaN; }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// stream reads a Server-Sent Events stream with fetch(), so the token goes
// in the Authorization header (EventSource cannot send one, and a token in
// a URL ends up in access logs). on(event, data) is called for each message
// that names its event; returning false ends the stream. It resolves when
// the stream ends: {status, body, heard}, status 0 when the network failed
// or signal aborted it, body the error answer of a refused stream, heard
// whether a message came.
export async function stream(path, { token, signal, on }) {
  const headers = { Accept: 'text/event-stream' };
  if (token) headers.Authorization = 'Bearer ' + token;
  let r;
  try {
    r = await fetch(path, { headers, cache: 'no-store', signal });
  } catch {
    return { status: 0, body: null, heard: false };
  }
  if (!r.ok || !r.body) {
    let body = null;
    try { body = await r.json(); } catch { /* not JSON */ }
    return { status: r.status, body, heard: false };
  }
  let heard = false;
  try {
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let cut;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const msg = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        const ev = /^event: (.*)$/m.exec(msg);
        const data = /^data: (.*)$/m.exec(msg);
        if (!ev || !data) continue; // the retry line, a ping
        heard = true;
        if (on(ev[1], data[1]) === false) {
          reader.cancel().catch(() => {});
          return { status: r.status, body: null, heard };
        }
      }
    }
  } catch { /* the network, or aborted */ }
  return { status: 0, body: null, heard };
}
