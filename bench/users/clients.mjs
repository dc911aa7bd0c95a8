// MCP SDK clients that check every answer themselves, below the SDK: each
// tools/call the client sends is recorded by its JSON-RPC id with the
// message it carries, and each response that arrives is judged against it:
// once (a second one is a duplicate), to its own client (an id this client
// never sent, or another client's message, is misrouted), unchanged (the
// echo's text is exactly "Echo: " + what was sent).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";


export function newCounts() {
  return { sent: 0, ok: 0, lost: 0, duplicated: 0, misrouted: 0, damaged: 0, failed: 0 };
}

export function addCounts(into, c) {
  for (const k of Object.keys(into)) into[k] += c[k];
  return into;
}

/** A message of exactly `size` bytes naming its client, round and call;
 * the filler has characters JSON escapes ("\\), so the bytes on the wire
 * are not the bytes of the text. */
export function message(client, tag, seq, size) {
  const head = `c${client}-${tag}-${seq}-`;
  const filler = 'abcdefgh"ijklmnop\\qrstuvwxyz0123456789 ';
  let s = head;
  while (s.length < size) s += filler;
  return s.slice(0, size);
}

/** Connects client n over `transport`; returns { client, n, setupMs, counts,
 * errors, call, close }. A call waits `timeoutMs` for its answer (a lost one
 * ends there) and returns false when it failed. */
export async function connect(transport, n, timeoutMs) {
  const client = new Client({ name: `bench-${n}`, version: "1.0.0" }, { capabilities: {} });
  const t0 = performance.now();
  await client.connect(transport);
  const setupMs = performance.now() - t0;
  const counts = newCounts();
  const pending = new Map(); // id -> message sent
  const answered = new Set();
  const errors = [];
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    if (msg.method === "tools/call") {
      pending.set(msg.id, msg.params.arguments.message);
      counts.sent++;
    }
    return send(msg, opts);
  };
  const deliver = transport.onmessage;
  transport.onmessage = (msg, extra) => {
    if (msg.id !== undefined && (msg.result !== undefined || msg.error !== undefined) && !msg.method) judge(msg);
    deliver(msg, extra);
  };
  function judge(msg) {
    const text = msg.result?.content?.[0]?.text;
    if (typeof text === "string" && /^Echo: c\d+-/.test(text) && !text.startsWith(`Echo: c${n}-`))
      return void counts.misrouted++; // another client's answer (its id may well be one of ours)
    if (answered.has(msg.id)) return void counts.duplicated++;
    const sent = pending.get(msg.id);
    if (sent === undefined) return void counts.misrouted++; // an id this client has no call for
    answered.add(msg.id);
    pending.delete(msg.id);
    if (text === `Echo: ${sent}`) counts.ok++;
    else counts.damaged++;
  }
  const call = async (msg) => {
    try {
      await client.callTool({ name: "echo", arguments: { message: msg } }, undefined, { timeout: timeoutMs });
      return true;
    } catch (e) {
      counts.failed++; // judged below the SDK too: a lost answer is lost there, a wrong one misrouted or damaged
      errors.push(String(e?.message ?? e).slice(0, 200));
      return false;
    }
  };
  const close = async () => {
    counts.lost += pending.size; // sent, never answered
    pending.clear();
    if (typeof transport.terminateSession === "function") {
      try {
        await transport.terminateSession(); // DELETE: the gateway ends the session (and its server)
      } catch {}
    }
    await client.close();
  };
  return { client, n, setupMs, counts, errors, call, close };
}
