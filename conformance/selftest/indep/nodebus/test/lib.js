'use strict';
// Small helpers for driving nodebus in tests.  Standard library only.
const fs = require('fs');
const os = require('os');
const net = require('net');
const path = require('path');
const cp = require('child_process');

const ROOT = path.resolve(__dirname, '..');
const BUS = path.join(ROOT, 'nodebus');
const WORKER = path.join(__dirname, 'workers', 'worker.js');
const NODE = process.execPath;

let tmpRoot = null;
const allBuses = [];
function tmpDir() {
  if (!tmpRoot) tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'nodebus-test-'));
  return tmpRoot;
}
let cfgN = 0;
function writeConfig(obj) {
  const p = path.join(tmpDir(), `cfg-${process.pid}-${++cfgN}.json`);
  fs.writeFileSync(p, typeof obj === 'string' ? obj : JSON.stringify(obj));
  return p;
}
function pool(id, instances, extraArgs) {
  return { id, command: NODE, args: [WORKER, '--tag', id].concat(extraArgs || []), instances };
}
let sockN = 0;
function sockPath() { return path.join(tmpDir(), `s${process.pid}-${++sockN}.sock`); }

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(pred, timeoutMs, what) {
  const end = Date.now() + (timeoutMs || 5000);
  for (;;) {
    const v = pred();
    if (v) return v;
    if (Date.now() > end) throw new Error('timeout waiting for ' + (what || pred.toString()));
    await sleep(10);
  }
}

// Starts the daemon.  mode: 'stdio' | 'unix' | 'tcp'
function startBus(config, mode, opts) {
  opts = opts || {};
  const cfgPath = typeof config === 'string' && config.endsWith('.json') && !config.startsWith('{') ? config : writeConfig(config);
  const args = ['--config', cfgPath, '--log-level', opts.logLevel || 'debug'];
  let sock = null;
  if (mode === 'unix') { sock = opts.sock || sockPath(); args.push('--unix', sock); }
  else if (mode === 'tcp') args.push('--tcp', opts.tcp || '127.0.0.1:0');
  else if (mode === 'stdio' && opts.explicitStdio) args.push('--stdio');
  const proc = cp.spawn(BUS, (opts.args || []).concat(args), { stdio: ['pipe', 'pipe', 'pipe'] });
  const bus = {
    proc, sock, stderr: '', stdoutBuf: Buffer.alloc(0), lines: [], exit: null, port: null,
    exited: null,
  };
  allBuses.push(bus);
  bus.exited = new Promise((resolve) => proc.on('exit', (code, signal) => { bus.exit = { code, signal }; resolve(bus.exit); }));
  proc.stderr.on('data', (d) => {
    bus.stderr += d.toString();
    const m = /listening transport=tcp host=\S+ port=(\d+)/.exec(bus.stderr);
    if (m) bus.port = Number(m[1]);
  });
  proc.stdout.on('data', (d) => {
    bus.stdoutBuf = Buffer.concat([bus.stdoutBuf, d]);
    let i;
    while ((i = bus.stdoutBuf.indexOf(10)) >= 0) {
      bus.lines.push(bus.stdoutBuf.subarray(0, i).toString());
      bus.stdoutBuf = bus.stdoutBuf.subarray(i + 1);
    }
  });
  proc.stdin.on('error', () => {});
  bus.send = (obj) => proc.stdin.write((typeof obj === 'string' ? obj : JSON.stringify(obj)) + '\n');
  bus.msgs = () => bus.lines.map((l) => JSON.parse(l));
  bus.waitLog = (re, t) => waitFor(() => re.test(bus.stderr), t || 5000, 'log ' + re);
  bus.countLog = (re) => (bus.stderr.match(new RegExp(re.source, 'g')) || []).length;
  bus.ready = async () => {
    if (mode === 'unix') await bus.waitLog(/listening transport=unix/);
    else if (mode === 'tcp') await waitFor(() => bus.port, 5000, 'tcp port');
    await waitFor(() => bus.countLog(/worker started/) >= (opts.workers || 1), 5000, 'workers started');
    return bus;
  };
  bus.stop = async (sig) => {
    if (bus.exit) return bus.exit;
    try { proc.kill(sig || 'SIGTERM'); } catch (_) { /* ignore */ }
    const t = setTimeout(() => { try { proc.kill('SIGKILL'); } catch (_) { /* ignore */ } }, 8000);
    const r = await bus.exited;
    clearTimeout(t);
    return r;
  };
  bus.connect = () => connectClient(mode === 'unix' ? { path: sock } : { host: '127.0.0.1', port: bus.port });
  return bus;
}

function connectClient(addr) {
  return new Promise((resolve, reject) => {
    const s = net.connect(addr);
    const c = { sock: s, buf: Buffer.alloc(0), lines: [], closed: false, ended: false };
    s.on('data', (d) => {
      c.buf = Buffer.concat([c.buf, d]);
      let i;
      while ((i = c.buf.indexOf(10)) >= 0) {
        c.lines.push(c.buf.subarray(0, i).toString());
        c.buf = c.buf.subarray(i + 1);
      }
    });
    s.on('end', () => { c.ended = true; });
    s.on('close', () => { c.closed = true; });
    s.on('error', () => {});
    c.send = (obj) => s.write((typeof obj === 'string' ? obj : JSON.stringify(obj)) + '\n');
    c.msgs = () => c.lines.map((l) => JSON.parse(l));
    c.waitLines = (n, t) => waitFor(() => c.lines.length >= n, t || 5000, `${n} lines (have ${c.lines.length})`);
    c.waitClosed = (t) => waitFor(() => c.closed || c.ended, t || 5000, 'client closed');
    c.close = () => s.destroy();
    s.on('connect', () => resolve(c));
    s.once('error', reject);
  });
}

function cleanup() {
  if (tmpRoot) { try { fs.rmSync(tmpRoot, { recursive: true, force: true }); } catch (_) { /* ignore */ } }
}

module.exports = { allBuses, BUS, WORKER, NODE, ROOT, writeConfig, pool, sockPath, sleep, waitFor, startBus, connectClient, cleanup, tmpDir };
