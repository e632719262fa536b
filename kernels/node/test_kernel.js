'use strict';
// Tests for the Node.js kernel driver (kernel.js), speaking docs/kernel-protocol.md to it.
// Node's own test runner, no packages beyond Debian's nodejs (which brings node-acorn):
//
//     ./run_tests.sh                   # in a container with Debian's Node 18, as the image has
//     node --test test_kernel.js       # on a host with Debian's nodejs
//
// Each test starts the driver as the agent does: stdin on /dev/null, stdout/stderr pipes, fd 3
// (requests), fd 4 (events), fd 5 (snapshot stream) and, when restoring, fd 6 (a snapshot data
// file, RUNTIMECTL_RESTORE_FD=6), in its own process group. (Node's 'pipe' stdio entries are
// socket pairs rather than pipes; the agent's real pipes are covered by session/node_test.go.)

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const KERNEL = process.env.KERNEL_JS || path.join(__dirname, 'kernel.js');
const TIMEOUT = Number(process.env.KERNEL_TEST_TIMEOUT || 20) * 1000;

class Stream {
  constructor(readable) {
    this.buf = Buffer.alloc(0);
    this.waiters = [];
    this.eof = false;
    readable.on('data', (b) => { this.buf = Buffer.concat([this.buf, b]); this.wake(); });
    readable.on('end', () => { this.eof = true; this.wake(); });
    readable.on('error', () => { this.eof = true; this.wake(); });
  }

  wake() { for (const w of this.waiters.splice(0)) w(); }

  // until waits for pred(buf) to return something other than undefined.
  async until(pred, what) {
    const deadline = Date.now() + TIMEOUT;
    for (;;) {
      const r = pred(this.buf);
      if (r !== undefined) return r;
      if (this.eof) throw new Error('stream ended waiting for ' + what);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('timed out waiting for ' + what + '; have ' + JSON.stringify(this.buf.toString().slice(-300)));
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(t); resolve(); });
      });
    }
  }

  take(n) { const b = this.buf.subarray(0, n); this.buf = this.buf.subarray(n); return b; }
}

class Kernel {
  constructor({ restore, env } = {}) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rtk-'));
    const stdio = ['ignore', 'pipe', 'pipe', 'pipe', 'pipe', 'pipe'];
    const extraEnv = { RUNTIMECTL_LANG: 'node', RUNTIMECTL_OUTPUTS: path.join(this.dir, 'outputs') };
    if (restore !== undefined) {
      const f = path.join(this.dir, 'restore.snap');
      fs.writeFileSync(f, restore);
      stdio.push(fs.openSync(f, 'r'));
      extraEnv.RUNTIMECTL_RESTORE_FD = '6';
    }
    this.p = spawn(process.execPath, [KERNEL], { stdio, cwd: this.dir, env: { ...process.env, ...extraEnv, ...env }, detached: true });
    if (restore !== undefined) fs.closeSync(stdio[6]);
    this.out = new Stream(this.p.stdio[1]);
    this.err = new Stream(this.p.stdio[2]);
    this.ev = new Stream(this.p.stdio[4]);
    this.snap = new Stream(this.p.stdio[5]);
    this.req = this.p.stdio[3];
    this.seq = 0;
    this.exited = new Promise((resolve) => this.p.on('exit', (code, sig) => resolve({ code, sig })));
  }

  send(obj) { this.req.write(JSON.stringify(obj) + '\n'); }

  async event(pred = () => true, what = 'an event') {
    return this.ev.until((buf) => {
      for (;;) {
        const i = buf.indexOf(10);
        if (i < 0) return undefined;
        const line = this.ev.take(i + 1).toString().trim();
        buf = this.ev.buf;
        if (!line) continue;
        const e = JSON.parse(line);
        if (pred(e)) return e;
      }
    }, what);
  }

  async ready() { this.readyEvent = await this.event((e) => e.op === 'ready', 'ready'); return this.readyEvent; }

  async exec(code, { onSent } = {}) {
    const seq = ++this.seq;
    const nonce = crypto.randomBytes(16).toString('hex');
    const id = 'x' + seq;
    this.send({ op: 'exec', id, seq, code, nonce });
    if (onSent) onSent();
    const upTo = (s) => s.until((buf) => {
      const i = buf.indexOf(nonce);
      if (i < 0) return undefined;
      const text = s.take(i).toString();
      s.take(nonce.length);
      return text;
    }, 'the nonce');
    const [stdout, stderr, done] = await Promise.all([upTo(this.out), upTo(this.err), this.event((e) => e.op === 'done' && e.id === id, 'done')]);
    return { ...done, stdout, stderr, seq };
  }

  async snapshot() {
    const id = 's' + (++this.seq);
    this.send({ op: 'snapshot', id });
    const chunk = () => this.snap.until((buf) => {
      const i = buf.indexOf(10);
      if (i < 0) return undefined;
      const n = Number(buf.subarray(0, i).toString());
      if (buf.length < i + 1 + n) return undefined;
      this.snap.take(i + 1);
      return Buffer.from(this.snap.take(n));
    }, 'a snapshot chunk');
    const parts = [];
    for (;;) {
      const c = await chunk();
      if (c.length === 0) break;
      parts.push(c);
    }
    const manifest = JSON.parse((await chunk()).toString());
    const started = await this.event((e) => e.op === 'snapshot_started' && e.id === id, 'snapshot_started');
    return { data: Buffer.concat(parts), manifest, started };
  }

  async vars() {
    const id = 'v' + (++this.seq);
    this.send({ op: 'vars', id });
    return this.event((e) => e.op === 'vars' && e.id === id, 'vars');
  }

  async close() {
    try { process.kill(-this.p.pid, 'SIGKILL'); } catch (_) { /* gone */ }
    await this.exited;
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

async function withKernel(opts, fn) {
  const k = new Kernel(opts);
  try {
    await k.ready();
    await fn(k);
  } finally {
    await k.close();
  }
}

test('ready, then state across executions: var, let, const, function, class', () => withKernel({}, async (k) => {
  assert.deepEqual(k.readyEvent.restored, []);
  assert.deepEqual(k.readyEvent.failed, []);
  assert.match(k.readyEvent.info.interpreter, /^Node\.js v\d+/);
  let r = await k.exec('var a = 1; let b = 2; const c = 3\nfunction f(x) { return x * 10 }\nclass P { constructor(x) { this.x = x } twice() { return this.x * 2 } }');
  assert.equal(r.status, 'ok', r.stderr);
  assert.equal(r.result, null);
  assert.equal(r.changed, true);
  r = await k.exec('[a, b, c, f(4), new P(21).twice()]');
  assert.equal(r.status, 'ok', r.stderr);
  assert.equal(r.result, '[ 1, 2, 3, 40, 42 ]');
  // Declaring again is allowed, as in a notebook.
  r = await k.exec('let b = 20; const c = 30; class P { get y() { return 7 } }\nb + c + new P().y');
  assert.equal(r.status, 'ok', r.stderr);
  assert.equal(r.result, '57');
}));

test('results: the final expression, inspected; output on stdout and stderr', () => withKernel({}, async (k) => {
  let r = await k.exec('console.log("hello", {a: 1}); console.error("to stderr"); process.stdout.write("raw\\n"); "s"');
  assert.equal(r.status, 'ok', r.stderr);
  assert.equal(r.stdout, 'hello { a: 1 }\nraw\n');
  assert.equal(r.stderr, 'to stderr\n');
  assert.equal(r.result, "'s'");
  r = await k.exec('var x = 5');
  assert.equal(r.result, null, 'a declaration has no result');
  r = await k.exec('x = 6');
  assert.equal(r.result, '6', 'an assignment is an expression, as in the REPL');
  r = await k.exec('undefined');
  assert.equal(r.result, null);
  r = await k.exec('if (x) { 5 }');
  assert.equal(r.result, null, 'only a final expression statement has a result');
  r = await k.exec('new Map([[1, {deep: [1, 2]}]])');
  assert.equal(r.result, 'Map(1) { 1 => { deep: [ 1, 2 ] } }');
  r = await k.exec('require("child_process").execSync("echo from a child; ls /proc/self/fd | sort -n | tr \'\\\\n\' \' \'", {stdio: "inherit"}); null');
  assert.equal(r.status, 'ok', r.stderr);
  assert.match(r.stdout, /^from a child\n0 1 2 3 $/, 'the child sees fds 0-2 (and ls its own directory), not 3-6');
}));

test('errors: name, message, stack pointing at the user line, on stderr too; state kept', () => withKernel({}, async (k) => {
  let r = await k.exec('var kept = 1\nfunction inner() { throw new TypeError("boom") }\ninner()');
  assert.equal(r.status, 'error');
  assert.equal(r.error.name, 'TypeError');
  assert.equal(r.error.value, 'boom');
  assert.match(r.error.traceback, /^<exec-1>:2\nfunction inner\(\) \{ throw new TypeError\("boom"\) \}\n +\^\n\nTypeError: boom\n {4}at inner \(<exec-1>:2:26\)\n {4}at <exec-1>:3:1$/);
  assert.doesNotMatch(r.error.traceback, /kernel\.js|node:vm/);
  assert.equal(r.stderr, r.error.traceback + '\n');
  r = await k.exec('kept + undefinedName');
  assert.equal(r.error.name, 'ReferenceError');
  assert.equal(r.error.value, 'undefinedName is not defined');
  r = await k.exec('kept');
  assert.equal(r.result, '1', 'names assigned before the exception are kept');
  r = await k.exec('throw 42');
  assert.equal(r.status, 'error');
  assert.deepEqual([r.error.name, r.error.value], ['Uncaught', '42']);
  r = await k.exec('let y = ;');
  assert.equal(r.status, 'error');
  assert.equal(r.error.name, 'SyntaxError');
  assert.match(r.error.traceback, /<exec-5>:1\nlet y = ;\n/);
  assert.equal(r.changed, false, 'code that does not compile changes nothing');
}));

test('top-level await, promises, import declarations, dynamic import', () => withKernel({}, async (k) => {
  let r = await k.exec('const v = await Promise.resolve(41)\nlet [p, q] = [1, 2]\nfunction g() { return v + 1 }\nclass K {}\ng()');
  assert.equal(r.status, 'ok', r.stderr);
  assert.equal(r.result, '42');
  r = await k.exec('[v, p, q, g(), typeof K]');
  assert.equal(r.result, "[ 41, 1, 2, 42, 'function' ]");
  r = await k.exec('async function main() { await new Promise((r) => setTimeout(r, 50)); console.log("done"); return 7 }\nmain()');
  assert.equal(r.status, 'ok', r.stderr);
  assert.equal(r.stdout, 'done\n', 'a promise result is awaited, with its output');
  assert.equal(r.result, '7');
  r = await k.exec('await Promise.reject(new RangeError("no"))');
  assert.equal(r.error.name, 'RangeError');
  r = await k.exec('import path, { join as j } from "path"\nimport * as os from "node:os"\n[path.join("a", "b"), j("c", "d"), typeof os.cpus]');
  assert.equal(r.status, 'ok', r.stderr);
  assert.equal(r.result, "[ 'a/b', 'c/d', 'function' ]");
  r = await k.exec('const m = await import("node:util"); typeof m.inspect');
  assert.equal(r.result, "'function'");
}));

test('changed: false for reads, true for mutations', () => withKernel({}, async (k) => {
  let r = await k.exec('var arr = [1]; var m = new Map()');
  assert.equal(r.changed, true);
  r = await k.exec('arr.length + 1');
  assert.equal(r.changed, false);
  r = await k.exec('console.log(arr)');
  assert.equal(r.changed, false);
  r = await k.exec('arr.push(2)');
  assert.equal(r.changed, true);
  r = await k.exec('var _private = 1');
  assert.equal(r.changed, false, 'private names are not saved');
}));

test('snapshot: JSON values, modules, top-level definitions kept; the rest skipped; restore', async () => {
  let data;
  await withKernel({}, async (k) => {
    const r = await k.exec([
      'var n = 1.5, s = "é\\n", t = true, nul = null, u = undefined',
      'const obj = {a: [1, {b: "c"}], d: {}}',
      'const path = require("path"); const { join } = require("path")',
      'function add(a, b) { return a + b + n }',
      'const sq = (v) => v * v',
      'class Base { hi() { return "hi " + this.name } }',
      'class Kid extends Base { constructor() { super(); this.name = "kid" } }',
      'const m = new Map([[1, 2]]); const inst = new Kid(); const nested = {when: new Date(0)}',
      'const made = ((k) => () => k)(3); let big = 10n; let cyc = {}; cyc.self = cyc; var _hidden = 1',
    ].join('\n'));
    assert.equal(r.status, 'ok', r.stderr);
    const snap = await k.snapshot();
    assert.equal(snap.manifest.ok, true, JSON.stringify(snap.manifest));
    assert.equal(snap.manifest.format, 'node-json-v1');
    assert.equal(snap.manifest.id, 's2');
    assert.equal(snap.started.pid, k.p.pid);
    assert.deepEqual(snap.manifest.kept.sort(), ['Base', 'Kid', 'add', 'join', 'n', 'nul', 'obj', 'path', 's', 'sq', 't', 'u'].sort());
    const skipped = Object.fromEntries(snap.manifest.skipped.map((x) => [x.name, x]));
    assert.deepEqual(Object.keys(skipped).sort(), ['big', 'cyc', 'inst', 'm', 'made', 'nested'].sort());
    assert.equal(skipped.m.type, 'Map');
    assert.match(skipped.m.reason, /Map, which JSON cannot hold/);
    assert.equal(skipped.inst.type, 'Kid');
    assert.match(skipped.nested.reason, /when is a Date/);
    assert.match(skipped.made.reason, /top level/);
    assert.match(skipped.cyc.reason, /cycle/);
    assert.equal(skipped.big.type, 'bigint');
    assert.equal(snap.manifest.bytes, snap.data.length);
    data = snap.data;
  });
  await withKernel({ restore: data }, async (k) => {
    assert.deepEqual(k.readyEvent.failed, []);
    assert.ok(k.readyEvent.restored.includes('add') && k.readyEvent.restored.includes('obj'));
    let r = await k.exec('JSON.stringify(obj)');
    assert.equal(r.result, `'{"a":[1,{"b":"c"}],"d":{}}'`);
    r = await k.exec('[n, s, t, nul, u, add(1, 2), sq(5), new Kid().hi(), new Kid() instanceof Base, join("x", "y"), path.sep, sq.name, typeof m].map(String).join("|")');
    assert.equal(r.status, 'ok', r.stderr);
    assert.equal(r.result, "'1.5|é\\n|true|null|undefined|4.5|25|hi kid|true|x/y|/|sq|undefined'");
    // A restored function keeps its place in the execution it came from.
    r = await k.exec('add(1, Symbol())');
    assert.match(r.error.traceback, /at add \(<exec-1>:4:/);
    assert.equal(r.changed, false);
    r = await k.exec('var more = 1');
    assert.equal(r.changed, true);
  });
});

test('restore: an unreadable snapshot starts empty and says so', () => withKernel({ restore: 'not json' }, async (k) => {
  assert.deepEqual(k.readyEvent.restored, []);
  assert.equal(k.readyEvent.failed.length, 1);
  assert.equal(k.readyEvent.failed[0].name, '*');
}));

test('vars: names, types, lengths, previews; modules and private names apart', () => withKernel({}, async (k) => {
  await k.exec('const fs = require("fs"); var xs = [1, 2, 3]; var str = "line1\\nline2"; var _p = 1; var m = new Map([[1, 1]])');
  const v = await k.vars();
  assert.deepEqual(v.modules, ['fs']);
  assert.deepEqual(v.private, ['_p']);
  const by = Object.fromEntries(v.vars.map((x) => [x.name, x]));
  assert.deepEqual(by.xs, { name: 'xs', type: 'Array', len: 3, preview: '[ 1, 2, 3 ]' });
  assert.equal(by.str.preview, "'line1\\nline2'");
  assert.equal(by.m.len, 1);
}));

test('SIGINT: ignored between executions; interrupts a busy loop and a pending await', () => withKernel({}, async (k) => {
  process.kill(-k.p.pid, 'SIGINT');
  await new Promise((r) => setTimeout(r, 200));
  let r = await k.exec('var alive = 1; alive');
  assert.equal(r.result, '1', 'the kernel survives SIGINT between executions');
  // SIGINT once the code has said it runs (then a little later, so it is inside the loop).
  const later = () => () => k.out.until((b) => (b.includes('go') ? true : undefined), 'go')
    .then(() => setTimeout(() => process.kill(-k.p.pid, 'SIGINT'), 100));
  r = await k.exec('var i = 0; console.log("go"); while (true) { i++ }', { onSent: later() });
  assert.equal(r.status, 'interrupted');
  assert.equal(r.error.name, 'Interrupted');
  r = await k.exec('console.log("go"); await new Promise((r) => setTimeout(r, 60000))', { onSent: later() });
  assert.equal(r.status, 'interrupted');
  r = await k.exec('i > 0 && alive');
  assert.equal(r.result, '1');
}));

test('requests that are not understood get an error event', () => withKernel({}, async (k) => {
  k.req.write('nonsense\n');
  let e = await k.event((x) => x.op === 'error');
  assert.match(e.error, /bad request/);
  k.send({ op: 'fly', id: 'r1' });
  e = await k.event((x) => x.op === 'error');
  assert.equal(e.id, 'r1');
  const r = await k.exec('1');
  assert.equal(r.result, '1');
}));

test('the end of fd 3 ends the kernel', async () => {
  const k = new Kernel();
  await k.ready();
  k.req.end();
  const { code } = await k.exited;
  assert.equal(code, 0);
  fs.rmSync(k.dir, { recursive: true, force: true });
});
