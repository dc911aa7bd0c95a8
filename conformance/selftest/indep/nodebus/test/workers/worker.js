#!/usr/bin/env node
'use strict';
// Configurable test worker.  Reads NDJSON on stdin and answers requests.
// Behaviour is chosen by the method of each request:
//   echo                -> result {worker, pid, method, params}
//   slow                -> same, after params.ms milliseconds
//   notify              -> sends params.count notifications with the message's
//                          sessionId (top-level or params), then the response
//   crash               -> exits with code params.code (default 3) immediately
//   garbage             -> writes a non-JSON line to stdout
//   flood               -> writes params.count notifications of params.size bytes
//   reply_wrong_id      -> responds with id "wrong-" + id
//   unroutable          -> writes {"jsonrpc":"2.0","method":"x"} (no id, no session)
//   exit_after_reply    -> responds then exits 0
//   big                 -> response carrying params.size bytes of payload
//   raw                 -> result.raw is the exact line received
//   reply_id            -> responds with id = params.replyId
//   send_raw            -> writes params.text verbatim to stdout, then responds
//   notify_later        -> responds, then params.ms later sends a session notification
// Notifications (no id) are recorded and can be fetched with method "seen".
// argv: --tag <name>  --no-read (never reads stdin)  --ignore-term  --crash-on-start
//       --stderr (writes a diagnostic line to stderr per message)
//       --term-delay <ms> (on SIGTERM: wait, then answer queued slow requests, exit)
const args = process.argv.slice(2);
const tag = args.includes('--tag') ? args[args.indexOf('--tag') + 1] : 'w';
const noRead = args.includes('--no-read');
const ignoreTerm = args.includes('--ignore-term');
const useStderr = args.includes('--stderr');
const termDelay = args.includes('--term-delay') ? Number(args[args.indexOf('--term-delay') + 1]) : 0;

if (args.includes('--crash-on-start')) process.exit(7);

const seen = [];
const inflight = new Set();
function send(obj) { process.stdout.write(JSON.stringify(obj) + '\n'); }
function sessionOf(m) {
  if (typeof m.sessionId === 'string') return m.sessionId;
  if (m.params && typeof m.params.sessionId === 'string') return m.params.sessionId;
  return undefined;
}
function reply(m, extra) {
  const r = { jsonrpc: '2.0', id: m.id, result: Object.assign({ worker: tag, pid: process.pid, method: m.method, params: m.params }, extra || {}) };
  if (typeof m.sessionId === 'string') r.sessionId = m.sessionId;
  send(r);
}

function handle(m) {
  if (useStderr) process.stderr.write(`[${tag}] got ${m.method}\n`);
  if (m.id === undefined || m.id === null) { seen.push(m); return; }
  if (m.result !== undefined || m.error !== undefined) { seen.push(m); return; }
  const p = m.params || {};
  switch (m.method) {
    case 'slow': {
      const t = setTimeout(() => { inflight.delete(t); reply(m); }, p.ms || 100);
      t.m = m;
      inflight.add(t);
      break;
    }
    case 'notify': {
      const sid = sessionOf(m);
      for (let i = 0; i < (p.count || 1); i++) {
        const n = { jsonrpc: '2.0', method: 'progress', params: { i, worker: tag } };
        if (p.inParams) n.params.sessionId = sid; else n.sessionId = sid;
        send(n);
      }
      reply(m);
      break;
    }
    case 'crash': process.exit(p.code === undefined ? 3 : p.code); break;
    case 'garbage': process.stdout.write('this is not json\n'); break;
    case 'flood': {
      const sid = sessionOf(m);
      const pad = 'x'.repeat(p.size || 1000);
      for (let i = 0; i < (p.count || 10); i++) send({ jsonrpc: '2.0', method: 'flood', sessionId: sid, params: { i, pad } });
      reply(m);
      break;
    }
    case 'reply_wrong_id': send({ jsonrpc: '2.0', id: 'wrong-' + m.id, result: {} }); break;
    case 'unroutable': send({ jsonrpc: '2.0', method: 'x' }); reply(m); break;
    case 'exit_after_reply': reply(m); process.exit(0); break;
    case 'big': reply(m, { payload: 'y'.repeat(p.size || 1000) }); break;
    case 'seen': reply(m, { seen }); break;
    case 'raw': reply(m, { raw: m.__raw }); break;
    case 'reply_id': send({ jsonrpc: '2.0', id: p.replyId, result: { worker: tag } }); break;
    case 'send_raw': process.stdout.write(p.text); reply(m); break;
    case 'notify_later': {
      const sid = sessionOf(m);
      reply(m);
      setTimeout(() => send({ jsonrpc: '2.0', method: 'later', sessionId: sid, params: {} }), p.ms || 300);
      break;
    }
    default: reply(m);
  }
}

let buf = '';
if (!noRead) {
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i); buf = buf.slice(i + 1);
      if (!line.trim()) continue;
      let m;
      try { m = JSON.parse(line); } catch (e) { send({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } }); continue; }
      if (m && typeof m === 'object') Object.defineProperty(m, '__raw', { value: line, enumerable: false });
      handle(m);
    }
  });
  process.stdin.on('end', () => { if (inflight.size === 0) process.exit(0); });
} else {
  setInterval(() => {}, 1000);
}

process.on('SIGTERM', () => {
  if (ignoreTerm) return;
  if (termDelay) {
    setTimeout(() => {
      for (const t of inflight) { clearTimeout(t); reply(t.m, { flushedOnTerm: true }); }
      process.exit(0);
    }, termDelay);
    return;
  }
  process.exit(0);
});
