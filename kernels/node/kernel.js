'use strict';
// The JavaScript (Node.js) kernel driver: one persistent global scope for a session, speaking
// docs/kernel-protocol.md on fds 3 (requests), 4 (events), 5 (snapshot stream) and, when
// restoring, 6 (the snapshot data).
//
// Executions run in this process's own context through vm.Script#runInThisContext, so code sees
// Node's real globals (process, Buffer, fetch, timers) plus `require` rooted at the working
// directory. What persists between executions is the global scope; to make it behave like a
// notebook, each cell is parsed with acorn (Debian's node-acorn, a dependency of nodejs) and:
//   - top-level `let`/`const` become `var` and `class X {}` becomes `var X = class X {}`, so that
//     they are properties of globalThis (listable, snapshot-able) and can be declared again by a
//     later cell, as in a notebook;
//   - a cell with top-level `await` (or `import` declarations) runs as an async function whose
//     top-level declarations are hoisted to global `var`s; its promise is awaited;
//   - the value of a final expression statement is the result (util.inspect), and a promise
//     value is awaited first.
// Snapshots hold what can be faithfully restored: JSON-able values (null, booleans, finite
// numbers, strings, plain objects and arrays, no cycles), `undefined`, modules loaded with
// require()/import (by name), and functions and classes declared at the top level of a cell (by
// their source text, which is re-evaluated in the global scope). Everything else (a Map, a class
// instance, a closure made inside a function, a Promise) is listed as skipped, with its type and
// the reason. Names that start with "_" are private: not saved.
//
// Node's synchronous code is interrupted through vm's breakOnSigint; code awaiting a promise is
// abandoned (reported as interrupted) when SIGINT arrives; a busy loop that runs after an
// `await` cannot be interrupted, and the agent kills and restarts the kernel after its grace.
// Between executions SIGINT is ignored (a handler, so child processes get the default).
// Node marks inherited descriptors close-on-exec at start-up, so child processes started by the
// code do not get fds 3-6.

const fs = require('fs');
const vm = require('vm');
const util = require('util');
const path = require('path');
const net = require('net');
const url = require('url');
const crypto = require('crypto');
const Module = require('module');
const { Writable } = require('stream');

// The user's code shares the global object: keep our own references to what we use.
const G = globalThis;
const proc = process;
const { JSON: J, Object: Obj, Array: Arr, Number: Num, Buffer: Buf, Promise: Prom, Map: MapC, WeakMap: WeakMapC,
  Set: SetC, String: Str, Reflect: Refl, Date: DateC, SharedArrayBuffer: SAB, Int32Array: I32, Atomics: Atom } = G;
const setImmediateF = setImmediate;
const inspect = util.inspect;
const fnToString = Function.prototype.toString;
const isProxy = util.types.isProxy;
const isNativeError = util.types.isNativeError;
const isPromise = util.types.isPromise;

let acorn = null;
try {
  acorn = require('acorn');
} catch (_) {
  acorn = null; // without it, cells run as they are (let/const do not persist as globals)
}

const REQ_FD = 3;
const EVT_FD = 4;
const SNAP_FD = 5;
const MAX_TEXT = 1000000;
const PREVIEW_LEN = 80;
const FORMAT = 'node-json-v1';
const INTERPRETER = 'Node.js ' + proc.version;
const INFO = { interpreter: INTERPRETER, serializer: 'JSON (' + FORMAT + ') + module names + top-level definitions by source' };
const SELF = __filename;

// ------------------------------------------------------------------------------------- I/O

const sleepCell = new I32(new SAB(4));
function sleepMs(ms) { Atom.wait(sleepCell, 0, 0, ms); }

function writeAll(fd, data) {
  const b = typeof data === 'string' ? Buf.from(data, 'utf8') : data;
  let off = 0;
  while (off < b.length) {
    try {
      off += fs.writeSync(fd, b, off, b.length - off);
    } catch (e) {
      if (e && e.code === 'EAGAIN') { sleepMs(2); continue; }
      throw e;
    }
  }
}

function event(obj) { writeAll(EVT_FD, J.stringify(obj) + '\n'); }

function note(text) {
  try { writeAll(2, 'runtimectl: ' + text + '\n'); } catch (_) { /* the agent is gone */ }
}

function cap(s) { return s.length > MAX_TEXT ? s.slice(0, MAX_TEXT) : s; }

// process.stdout/stderr write synchronously straight to fds 1 and 2: nothing is buffered when
// the nonce is written, and the pipes stay in blocking mode for child processes that inherit
// them (a libuv pipe stream would make them non-blocking).
function stdioStream(fd) {
  const s = new Writable({
    decodeStrings: false,
    write(chunk, enc, cb) {
      try {
        writeAll(fd, typeof chunk === 'string' ? Buf.from(chunk, enc === 'buffer' ? 'utf8' : enc) : chunk);
      } catch (_) { /* a closed pipe loses the output, not the kernel */ }
      cb();
    },
  });
  s.fd = fd;
  s.isTTY = false;
  s._isStdio = true;
  s._destroy = (err, cb) => cb(err); // never close fds 1/2 under the agent's feet
  return s;
}
const stdout = stdioStream(1);
const stderr = stdioStream(2);
Obj.defineProperty(proc, 'stdout', { configurable: true, enumerable: false, get: () => stdout });
Obj.defineProperty(proc, 'stderr', { configurable: true, enumerable: false, get: () => stderr });
// The global console binds to process.stdout lazily; make sure it is ours whatever happened.
G.console = new console.Console({ stdout, stderr });

// ----------------------------------------------------------------------- the user's globals

// require() as in a REPL started in the working directory; modules it returns are remembered
// (with the name they were required by) so that a snapshot can store them by name.
const moduleOf = new WeakMapC(); // module object (or one of its members) -> {spec, how, member?}
const baseRequire = Module.createRequire(path.join(proc.cwd(), '[runtimectl]'));

function isObjectLike(v) { return v !== null && (typeof v === 'object' || typeof v === 'function'); }

function remember(m, spec, how) {
  if (!isObjectLike(m)) return;
  if (!moduleOf.has(m)) moduleOf.set(m, { spec, how });
  // Members (`const { join } = require('path')`) are restored as require(spec).member.
  let keys = [];
  try { keys = Obj.keys(m); } catch (_) { keys = []; }
  for (const k of keys.slice(0, 2000)) {
    let v;
    try {
      const d = Obj.getOwnPropertyDescriptor(m, k);
      if (!d || !('value' in d)) continue;
      v = d.value;
    } catch (_) { continue; }
    if (isObjectLike(v) && !moduleOf.has(v)) moduleOf.set(v, { spec, how, member: k });
  }
}

function specFor(id) {
  if (id.startsWith('./') || id.startsWith('../') || id === '.' || id === '..') {
    return path.resolve(proc.cwd(), id);
  }
  return id;
}

function userRequire(id) {
  const m = baseRequire(id);
  if (typeof id === 'string') remember(m, specFor(id), 'require');
  return m;
}
userRequire.resolve = baseRequire.resolve;
userRequire.cache = baseRequire.cache;
G.require = userRequire;

// import() for the code: relative and bare specifiers resolve from the working directory (and
// Debian's global module folders), as require() does.
function importURL(spec) {
  if (spec.startsWith('node:') || Module.builtinModules.includes(spec)) return spec;
  if (spec.startsWith('./') || spec.startsWith('../') || spec.startsWith('/')) {
    return url.pathToFileURL(path.resolve(proc.cwd(), spec)).href;
  }
  if (/^[a-z][a-z0-9+.-]*:/i.test(spec)) return spec;
  try {
    const r = baseRequire.resolve(spec);
    return path.isAbsolute(r) ? url.pathToFileURL(r).href : r;
  } catch (_) {
    return spec;
  }
}

async function userImport(spec) {
  spec = String(spec);
  const ns = await import(importURL(spec));
  const s = specFor(spec);
  if (!moduleOf.has(ns)) moduleOf.set(ns, { spec: s, how: 'import' });
  if (isObjectLike(ns.default) && !moduleOf.has(ns.default)) moduleOf.set(ns.default, { spec: s, how: 'import', member: 'default' });
  remember(ns, s, 'import');
  return ns;
}

const IMPORT_NAME = '__runtimectl_import';
Obj.defineProperty(G, IMPORT_NAME, { value: userImport, enumerable: false, configurable: false, writable: false });

// Definitions made at the top level of a cell: function or class -> where its source is.
const defOf = new WeakMapC();
let defCounter = 0;
// Sources of the executions, for the source line shown with an error.
const sources = new MapC();

// Identity of non-JSON values, for the change fingerprint.
const ids = new WeakMapC();
let idCounter = 0;
function idOf(v) {
  if (!isObjectLike(v)) return typeof v + ':' + Str(v);
  let i = ids.get(v);
  if (i === undefined) { i = ++idCounter; ids.set(v, i); }
  return '#' + i;
}

// The names of globalThis that exist before any user code are not the user's.
const baseline = new SetC(Refl.ownKeys(G).filter((k) => typeof k === 'string'));

function userNames() {
  const out = [];
  for (const k of Refl.ownKeys(G)) {
    if (typeof k === 'string' && !baseline.has(k)) out.push(k);
  }
  return out;
}

function typeName(v) {
  if (v === null) return 'null';
  const t = typeof v;
  if (t === 'function') {
    let src = '';
    try { src = fnToString.call(v); } catch (_) { src = ''; }
    if (/^class\b/.test(src)) return 'class';
    const c = Obj.getPrototypeOf(v);
    const n = c && c.constructor && c.constructor.name;
    return n && n !== 'Function' ? n : 'function';
  }
  if (t !== 'object') return t;
  try {
    if (Arr.isArray(v)) return 'Array';
    const p = Obj.getPrototypeOf(v);
    if (p === null) return 'Object';
    const c = p.constructor;
    if (c && typeof c.name === 'string' && c.name) return c.name;
  } catch (_) { /* a hostile proxy */ }
  return 'Object';
}

// jsonProblem says why v would not survive JSON.stringify + JSON.parse unchanged, or null.
function jsonProblem(v) {
  const onPath = new SetC();
  const where = [];
  function at() {
    let s = '';
    for (const k of where) s += typeof k === 'number' ? '[' + k + ']' : (/^[A-Za-z_$][\w$]*$/.test(k) ? '.' + k : '[' + J.stringify(k) + ']');
    return s === '' ? 'the value' : 'the value at ' + s.replace(/^\./, '');
  }
  function check(x, depth) {
    switch (typeof x) {
      case 'string': case 'boolean': return null;
      case 'number': return Num.isFinite(x) ? null : at() + ' is ' + x + ', which JSON cannot hold';
      case 'undefined': return at() + ' is undefined, which JSON cannot hold inside an object';
      case 'bigint': return at() + ' is a BigInt, which JSON cannot hold';
      case 'symbol': return at() + ' is a Symbol, which JSON cannot hold';
      case 'function': return at() + ' is a ' + typeName(x) + ' (only functions and classes declared at the top level of an execution are saved)';
      default: break;
    }
    if (x === null) return null;
    if (isProxy(x)) return at() + ' is a Proxy';
    if (depth > 500) return at() + ' is nested more than 500 levels deep';
    if (onPath.has(x)) return at() + ' refers back to itself (a cycle)';
    const isArr = Arr.isArray(x);
    const p = Obj.getPrototypeOf(x);
    if (isArr ? p !== Arr.prototype : (p !== Obj.prototype && p !== null)) {
      return at() + ' is a ' + typeName(x) + ', which JSON cannot hold';
    }
    if (Obj.getOwnPropertySymbols(x).length > 0) return at() + ' has Symbol keys';
    onPath.add(x);
    if (isArr) {
      for (let i = 0; i < x.length; i++) {
        if (!(i in x)) { where.push(i); const r = at() + ' is a hole in a sparse array'; where.pop(); onPath.delete(x); return r; }
        where.push(i);
        const r = check(x[i], depth + 1);
        where.pop();
        if (r) { onPath.delete(x); return r; }
      }
    } else {
      for (const k of Obj.keys(x)) {
        where.push(k);
        const r = check(x[k], depth + 1);
        where.pop();
        if (r) { onPath.delete(x); return r; }
      }
      if (typeof x.toJSON === 'function') { onPath.delete(x); return at() + ' has a toJSON method'; }
    }
    onPath.delete(x);
    return null;
  }
  return check(v, 0);
}

// collect looks at every user global (names not starting with "_") and says how a snapshot
// stores it: entries in definition order, the skipped ones, and a fingerprint of both.
function collect() {
  const entries = [];
  const skipped = [];
  const h = crypto.createHash('sha256');
  for (const name of userNames()) {
    if (name.startsWith('_')) continue;
    let v;
    try {
      v = G[name];
    } catch (e) {
      skipped.push({ name, type: '?', reason: 'reading it threw: ' + errText(e) });
      h.update('s' + name + '\0?\0');
      continue;
    }
    let entry = null;
    let reason = null;
    try {
      if (v === undefined) {
        entry = { name, undef: true };
        h.update('u' + name + '\0');
      } else if (isObjectLike(v) && moduleOf.has(v)) {
        const m = moduleOf.get(v);
        entry = { name, module: m.spec, how: m.how, member: m.member };
        h.update('m' + name + '\0' + m.spec + '\0' + (m.member || '') + '\0' + idOf(v) + '\0');
      } else if (typeof v === 'function' && defOf.has(v)) {
        const d = defOf.get(v);
        entry = { name, def: d, fname: v.name };
        h.update('d' + name + '\0' + idOf(v) + '\0');
      } else {
        reason = jsonProblem(v);
        if (reason === null) {
          const text = J.stringify(v);
          entry = { name, json: text };
          h.update('j' + name + '\0' + text + '\0');
        }
      }
    } catch (e) {
      reason = 'it could not be serialised: ' + errText(e);
    }
    if (entry) {
      entries.push(entry);
    } else {
      skipped.push({ name, type: typeName(v), reason });
      h.update('s' + name + '\0' + idOf(v) + '\0');
    }
  }
  return { entries, skipped, fingerprint: h.digest('hex') };
}

function errText(e) {
  try {
    if (isNativeError(e) || e instanceof Error) return (e.name || 'Error') + ': ' + e.message;
    return inspect(e);
  } catch (_) {
    return 'an exception';
  }
}

// --------------------------------------------------------------------------- preparing a cell

function patternNames(p, out) {
  if (!p) return out;
  switch (p.type) {
    case 'Identifier': out.push(p.name); break;
    case 'ObjectPattern': for (const q of p.properties) patternNames(q.type === 'RestElement' ? q.argument : q.value, out); break;
    case 'ArrayPattern': for (const q of p.elements) patternNames(q, out); break;
    case 'RestElement': patternNames(p.argument, out); break;
    case 'AssignmentPattern': patternNames(p.left, out); break;
    default: break;
  }
  return out;
}

function hasTopLevelAwait(node) {
  if (!node || typeof node.type !== 'string') return false;
  if (node.type === 'AwaitExpression') return true;
  if (node.type === 'ForOfStatement' && node.await) return true;
  if (node.type === 'FunctionDeclaration' || node.type === 'FunctionExpression' || node.type === 'ArrowFunctionExpression') return false;
  for (const k of Obj.keys(node)) {
    if (k === 'loc') continue;
    const v = node[k];
    if (Arr.isArray(v)) {
      for (const c of v) if (c && typeof c === 'object' && hasTopLevelAwait(c)) return true;
    } else if (v && typeof v === 'object' && typeof v.type === 'string' && hasTopLevelAwait(v)) {
      return true;
    }
  }
  return false;
}

function isDefinition(n) {
  return n && (n.type === 'FunctionExpression' || n.type === 'ArrowFunctionExpression' || n.type === 'ClassExpression');
}

function applyEdits(code, edits) {
  edits.forEach((e, i) => { e.i = i; });
  // At one position, insertions go before a replacement that starts there.
  edits.sort((a, b) => a.pos - b.pos || (a.end > a.pos) - (b.end > b.pos) || a.i - b.i);
  let out = '';
  let cur = 0;
  for (const e of edits) {
    if (e.pos < cur) continue; // overlapping edit: cannot happen with the edits made below
    out += code.slice(cur, e.pos) + e.text;
    cur = e.end;
  }
  return out + code.slice(cur);
}

const parseOptions = { ecmaVersion: 'latest', allowAwaitOutsideFunction: true, allowHashBang: true, locations: true };

// prepare turns a cell into the script that runs it. It returns {code, tla, lastExpr, defs}; a
// cell that acorn cannot parse is run as it is, so that V8 reports the syntax error.
function prepare(code) {
  const info = { code, tla: false, lastExpr: null, defs: [] };
  if (!acorn) return info;
  let ast;
  let isModule = false;
  try {
    ast = acorn.parse(code, { ...parseOptions, sourceType: 'script' });
  } catch (e) {
    try {
      ast = acorn.parse(code, { ...parseOptions, sourceType: 'module' });
      isModule = ast.body.some((s) => s.type === 'ImportDeclaration');
      if (!isModule || ast.body.some((s) => /^Export/.test(s.type))) return info;
    } catch (_) {
      return info;
    }
  }
  const body = ast.body;
  const tla = isModule || body.some((s) => hasTopLevelAwait(s));
  info.tla = tla;
  const last = body[body.length - 1];
  info.lastExpr = !!(last && last.type === 'ExpressionStatement');
  const edits = [];
  const hoisted = [];
  const fnNames = [];
  const src = (n) => code.slice(n.start, n.end);
  const def = (name, node, kind) => info.defs.push({ name, kind, start: node.start, end: node.end, line: node.loc.start.line, column: node.loc.start.column });
  // import(x) -> the driver's import function (vm scripts cannot import() in Node 18 without
  // --experimental-vm-modules); it resolves from the working directory.
  (function imports(node) {
    if (!node || typeof node.type !== 'string') return;
    if (node.type === 'ImportExpression') edits.push({ pos: node.start, end: node.start + 6, text: IMPORT_NAME });
    for (const k of Obj.keys(node)) {
      if (k === 'loc') continue;
      const v = node[k];
      if (Arr.isArray(v)) { for (const c of v) if (c && typeof c === 'object') imports(c); } else if (v && typeof v === 'object') imports(v);
    }
  })(ast);

  for (const st of body) {
    switch (st.type) {
      case 'VariableDeclaration':
        for (const d of st.declarations) {
          if (d.id.type === 'Identifier' && isDefinition(d.init)) def(d.id.name, d.init, 'expression');
        }
        if (!tla) {
          if (st.kind !== 'var') edits.push({ pos: st.start, end: st.start + st.kind.length, text: 'var'.padEnd(st.kind.length) });
        } else {
          // `let a = 1, {b} = o;` -> `void ((a = 1), ({b} = o));` with `var a, b` hoisted.
          edits.push({ pos: st.start, end: st.start + st.kind.length, text: 'void (' });
          for (const d of st.declarations) {
            hoisted.push(...patternNames(d.id, []));
            if (d.init) {
              edits.push({ pos: d.start, end: d.start, text: '(' });
              edits.push({ pos: d.end, end: d.end, text: ')' });
            } else if (st.kind === 'var') {
              edits.push({ pos: d.start, end: d.end, text: '(void 0)' });
            } else {
              edits.push({ pos: d.start, end: d.end, text: '(' + d.id.name + ' = undefined)' });
            }
          }
          edits.push({ pos: st.declarations[st.declarations.length - 1].end, end: st.declarations[st.declarations.length - 1].end, text: ')' });
        }
        break;
      case 'ClassDeclaration':
        def(st.id.name, st, 'class');
        if (tla) hoisted.push(st.id.name);
        edits.push({ pos: st.start, end: st.start, text: (tla ? '' : 'var ') + st.id.name + ' = ' });
        edits.push({ pos: st.end, end: st.end, text: ';' });
        break;
      case 'FunctionDeclaration':
        def(st.id.name, st, 'function');
        if (tla) { hoisted.push(st.id.name); fnNames.push(st.id.name); }
        break;
      case 'ImportDeclaration': {
        // import x, {a as b} from 'm' / import * as ns from 'm' / import 'm'
        const spec = J.stringify(st.source.value);
        const parts = [];
        for (const s of st.specifiers) {
          hoisted.push(s.local.name);
          if (s.type === 'ImportDefaultSpecifier') parts.push(s.local.name + ' = __rt_ns.default');
          else if (s.type === 'ImportNamespaceSpecifier') parts.push(s.local.name + ' = __rt_ns');
          else {
            const imported = s.imported.type === 'Identifier' ? s.imported.name : s.imported.value;
            parts.push(s.local.name + ' = __rt_ns[' + J.stringify(imported) + ']');
          }
        }
        const lines = (src(st).match(/\n/g) || []).join('');
        edits.push({ pos: st.start, end: st.end, text: 'await (async (__rt_ns) => { ' + parts.join('; ') + ' })(await ' + IMPORT_NAME + '(' + spec + '));' + lines });
        break;
      }
      default:
        break;
    }
  }
  if (tla) {
    if (info.lastExpr) {
      edits.push({ pos: last.start, end: last.end, text: 'return (' + src(last.expression) + ');' });
    }
    const names = [...new SetC(hoisted)];
    // `this` in the arrow is the global object: function declarations are made global at once.
    const assign = fnNames.map((n) => 'this[' + J.stringify(n) + '] = ' + n + '; ').join('');
    const head = (names.length ? 'var ' + names.join(', ') + '; ' : '') + '(async () => { ' + assign;
    edits.push({ pos: 0, end: 0, text: head });
    edits.push({ pos: code.length, end: code.length, text: '\n})()' });
  }
  // A definition's source as the script has it, to recognise the function it made.
  for (const d of info.defs) {
    const inside = edits.filter((e) => e.pos >= d.start && e.end <= d.end && !(e.pos === e.end && (e.pos === d.start || e.pos === d.end)))
      .map((e) => ({ pos: e.pos - d.start, end: e.end - d.start, text: e.text }));
    d.source = applyEdits(code.slice(d.start, d.end), inside);
  }
  info.code = applyEdits(code, edits);
  return info;
}

// ------------------------------------------------------------------------------------ errors

function isDriverFrame(line) {
  return line.includes(SELF) || /\(node:vm[:)]/.test(line) || /at node:vm:/.test(line) ||
    /new Script \(/.test(line) || /runInThisContext/.test(line);
}

// cleanStack keeps the message and the frames above the driver's.
function cleanStack(stack) {
  const lines = Str(stack).split('\n');
  const out = [];
  let inFrames = false;
  for (const l of lines) {
    const frame = /^\s+at /.test(l);
    if (frame) inFrames = true;
    if (inFrames && frame && isDriverFrame(l)) break;
    out.push(l);
  }
  while (out.length > 1 && /^\s+at .*\(node:internal\/(process\/task_queues|modules\/run_main)/.test(out[out.length - 1])) out.pop();
  return out.join('\n');
}

// sourceHeader shows the line of the execution where the error happened, as Node prints an
// uncaught error: "<exec-3>:2\n    throw new Error('x')\n    ^".
function sourceHeader(stack) {
  const m = /<exec-(\d+)>:(\d+):(\d+)/.exec(stack);
  if (!m) return '';
  const file = '<exec-' + m[1] + '>';
  const code = sources.get(file);
  if (code === undefined) return '';
  const line = code.split('\n')[Num(m[2]) - 1];
  if (line === undefined) return '';
  return file + ':' + m[2] + '\n' + line + '\n' + ' '.repeat(Math.max(0, Num(m[3]) - 1)) + '^\n\n';
}

const INTERRUPTED = { interrupted: true };

function describeError(e) {
  if (e === INTERRUPTED) {
    const text = 'Interrupted: the execution was interrupted by SIGINT while it waited for a promise (work it started may still run)';
    return { name: 'Interrupted', value: 'interrupted by SIGINT', traceback: text };
  }
  let name;
  let value;
  let text;
  try {
    if (isNativeError(e) || e instanceof Error) {
      name = Str(e.name || (e.constructor && e.constructor.name) || 'Error');
      value = Str(e.message);
      if (e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
        name = 'Interrupted';
        value = 'interrupted by SIGINT';
      }
      const stack = typeof e.stack === 'string' && e.stack ? cleanStack(e.stack) : name + ': ' + value;
      text = /^<exec-\d+>:\d+\n/.test(stack) ? stack : sourceHeader(stack) + stack;
    } else {
      name = 'Uncaught';
      value = inspect(e);
      text = 'Uncaught ' + value;
    }
  } catch (e2) {
    name = 'Error';
    value = '<the exception could not be described>';
    text = name + ': ' + value;
  }
  return { name: cap(name), value: cap(value), traceback: cap(text) };
}

// ------------------------------------------------------------------------------- executions

let lastFingerprint = null;
let interruptWait = null;
let execCounter = 0; // file names when a request has no seq

proc.on('SIGINT', () => {
  // Between executions: nothing. While an execution awaits a promise: stop waiting.
  if (interruptWait) interruptWait();
});
proc.on('uncaughtException', (e) => {
  try { writeAll(2, 'Uncaught exception in a callback: ' + describeError(e).traceback + '\n'); } catch (_) { /* gone */ }
});
proc.on('unhandledRejection', (e) => {
  try { writeAll(2, 'Unhandled promise rejection: ' + describeError(e).traceback + '\n'); } catch (_) { /* gone */ }
});

function awaitInterruptibly(p) {
  return new Prom((resolve, reject) => {
    interruptWait = () => reject(INTERRUPTED);
    Prom.resolve(p).then(resolve, reject);
  }).finally(() => { interruptWait = null; });
}

function recordDefs(prep, file) {
  for (const d of prep.defs) {
    let v;
    try { v = G[d.name]; } catch (_) { continue; }
    if (typeof v !== 'function' || defOf.has(v)) continue;
    let text;
    try { text = fnToString.call(v); } catch (_) { continue; }
    // Only the very function that this source made (a later reassignment is not it).
    if (text !== d.source) continue;
    defOf.set(v, { kind: d.kind, source: d.source, file, line: d.line, column: d.column, order: ++defCounter });
  }
}

// execEnv sets an execution's own environment and working directory (`exec -e -w`) and
// returns what puts them back. The directory first: it is the one step that can fail.
function execEnv(req) {
  const saved = [];
  let cwd = null;
  if (typeof req.session === 'string' && req.session !== '' && process.env.RUNTIMECTL_SESSION !== req.session) {
    process.env.RUNTIMECTL_SESSION = req.session; // a warm pool's member, claimed: its name from then on
  }
  if (typeof req.cwd === 'string' && req.cwd !== '') {
    cwd = process.cwd();
    process.chdir(req.cwd);
  }
  if (typeof req.env_b64 === 'string' && req.env_b64 !== '') {
    for (const kv of Buffer.from(req.env_b64, 'base64').toString('utf8').split('\0')) {
      const i = kv.indexOf('=');
      if (i <= 0) continue;
      const k = kv.slice(0, i);
      saved.push([k, Object.prototype.hasOwnProperty.call(process.env, k) ? process.env[k] : undefined]);
      process.env[k] = kv.slice(i + 1);
    }
  }
  return () => {
    for (const [k, v] of saved.reverse()) {
      if (v === undefined) delete process.env[k]; else process.env[k] = v;
    }
    if (cwd !== null) {
      try { process.chdir(cwd); } catch (_) { /* it went away */ }
    }
  };
}

async function handleExec(req) {
  const rid = req.id;
  const code = typeof req.code === 'string' ? req.code : '';
  const nonce = Str(req.nonce || '');
  const seq = Num.isInteger(req.seq) ? req.seq : ++execCounter;
  const file = '<exec-' + seq + '>';
  sources.set(file, code);
  let status = 'ok';
  let result = null;
  let error = null;
  let compiled = true;
  let prep = { code, tla: false, lastExpr: null, defs: [] };
  let undo = () => {};
  try {
    undo = execEnv(req);
    prep = prepare(code);
    let script;
    try {
      script = new vm.Script(prep.code, { filename: file });
    } catch (e) {
      compiled = false;
      if (prep.code !== code) {
        // Our rewrite should never break code that V8 accepts; run it as it is then.
        try {
          script = new vm.Script(code, { filename: file });
          prep = { code, tla: false, lastExpr: null, defs: [] };
          compiled = true;
        } catch (_) { /* report the first error */ }
      }
      if (!compiled) throw e;
    }
    let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (prep.tla || isPromise(value)) value = await awaitInterruptibly(value);
    const show = prep.lastExpr === null ? true : prep.lastExpr;
    if (show && value !== undefined) result = cap(inspect(value));
  } catch (e) {
    status = e === INTERRUPTED || (e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') ? 'interrupted' : 'error';
    error = describeError(e);
    try { writeAll(2, error.traceback + '\n'); } catch (_) { /* gone */ }
  }
  try { recordDefs(prep, file); } catch (e) { note('internal error recording definitions: ' + errText(e)); }
  // Let callbacks that are already due (resolved promises, finished I/O) write their output
  // inside this execution.
  await new Prom((r) => setImmediateF(r));
  try { undo(); } catch (e) { note('internal error restoring the environment: ' + errText(e)); }
  let changed = true;
  if (!compiled) {
    changed = false;
  } else {
    try {
      const fp = collect().fingerprint;
      changed = fp !== lastFingerprint;
      lastFingerprint = fp;
    } catch (e) {
      note('internal error: ' + errText(e));
    }
  }
  try {
    writeAll(1, nonce);
    writeAll(2, nonce);
  } catch (_) { /* gone */ }
  event({ op: 'done', id: rid, status, result, error, outputs: [], changed });
}

// ------------------------------------------------------------------------------------- vars

function preview(v) {
  let p;
  try {
    p = inspect(v, { depth: 1, breakLength: Infinity, maxArrayLength: 12, maxStringLength: PREVIEW_LEN + 20 });
  } catch (_) {
    return undefined;
  }
  p = p.replace(/\r/g, '\\r').replace(/\n/g, '\\n');
  return p.length > PREVIEW_LEN ? p.slice(0, PREVIEW_LEN - 3) + '...' : p;
}

function describe(name, v) {
  const d = { name, type: typeName(v) };
  try {
    if (typeof v === 'string') { d.len = v.length; d.size = Buf.byteLength(v); } else if (Arr.isArray(v)) d.len = v.length;
    else if (v instanceof MapC || v instanceof SetC) d.len = v.size;
    else if (ArrayBuffer.isView(v)) { if (typeof v.length === 'number') d.len = v.length; d.size = v.byteLength; } else if (v instanceof ArrayBuffer) d.size = v.byteLength;
  } catch (_) { /* leave them out */ }
  const p = preview(v);
  if (p !== undefined) d.preview = p;
  return d;
}

function handleVars(req) {
  const vars = [];
  const modules = [];
  const priv = [];
  for (const name of userNames()) {
    if (name.startsWith('_')) { priv.push(name); continue; }
    let v;
    try { v = G[name]; } catch (_) { vars.push({ name, type: '?' }); continue; }
    if (isObjectLike(v) && moduleOf.has(v) && !moduleOf.get(v).member) { modules.push(name); continue; }
    vars.push(describe(name, v));
  }
  event({ op: 'vars', id: req.id, vars, modules, private: priv });
}

// --------------------------------------------------------------------------------- snapshots

function writeChunk(data) {
  const b = typeof data === 'string' ? Buf.from(data, 'utf8') : data;
  writeAll(SNAP_FD, Buf.from(b.length + '\n', 'ascii'));
  if (b.length > 0) writeAll(SNAP_FD, b);
}

function snapshotData(c) {
  const parts = [];
  const files = new SetC();
  const defs = [];
  for (const e of c.entries) {
    const name = J.stringify(e.name);
    if (e.undef) parts.push('{"name":' + name + ',"undefined":true}');
    else if (e.json !== undefined) parts.push('{"name":' + name + ',"json":' + e.json + '}');
    else if (e.module !== undefined) parts.push(J.stringify({ name: e.name, module: e.module, how: e.how, member: e.member }));
    else if (e.def) defs.push(e);
  }
  defs.sort((a, b) => a.def.order - b.def.order);
  for (const e of defs) {
    files.add(e.def.file);
    parts.push(J.stringify({ name: e.name, def: { kind: e.def.kind, source: e.def.source, file: e.def.file, line: e.def.line, column: e.def.column }, fname: e.fname }));
  }
  const srcs = {};
  for (const f of files) if (sources.has(f)) srcs[f] = sources.get(f);
  return '{"format":' + J.stringify(FORMAT) + ',"interpreter":' + J.stringify(INTERPRETER) +
    ',"vars":[' + parts.join(',') + '],"sources":' + J.stringify(srcs) + '}';
}

function handleSnapshot(req) {
  const rid = req.id;
  const t0 = DateC.now();
  event({ op: 'snapshot_started', id: rid, pid: proc.pid });
  let manifest;
  try {
    const c = collect();
    const data = Buf.from(snapshotData(c), 'utf8');
    const CHUNK = 1 << 20;
    for (let off = 0; off < data.length; off += CHUNK) writeChunk(data.subarray(off, off + CHUNK));
    manifest = { id: rid, ok: true, error: null, format: FORMAT, kept: c.entries.map((e) => e.name), skipped: c.skipped, info: INFO, bytes: data.length, seconds: (DateC.now() - t0) / 1000 };
  } catch (e) {
    manifest = { id: rid, ok: false, error: 'snapshot failed: ' + errText(e), format: FORMAT, kept: [], skipped: [], info: INFO };
  }
  writeChunk('');
  writeChunk(J.stringify(manifest));
}

// restore loads the snapshot on fd RUNTIMECTL_RESTORE_FD: values first, then modules, then the
// definitions in the order they were made (a class may extend an earlier one).
async function restore() {
  const fdText = proc.env.RUNTIMECTL_RESTORE_FD;
  delete proc.env.RUNTIMECTL_RESTORE_FD;
  const restored = [];
  const failed = [];
  if (!fdText) return { restored, failed };
  const rfd = Num(fdText);
  let snap;
  try {
    const data = fs.readFileSync(rfd);
    snap = J.parse(data.toString('utf8'));
    if (!snap || snap.format !== FORMAT || !Arr.isArray(snap.vars)) throw new Error('not a ' + FORMAT + ' snapshot');
  } catch (e) {
    failed.push({ name: '*', type: 'snapshot', reason: 'the snapshot could not be read: ' + errText(e) });
    return { restored, failed };
  } finally {
    try { fs.closeSync(rfd); } catch (_) { /* closed already */ }
  }
  if (snap.sources && typeof snap.sources === 'object') {
    for (const f of Obj.keys(snap.sources)) sources.set(f, Str(snap.sources[f]));
  }
  const later = [];
  for (const v of snap.vars) {
    if (!v || typeof v.name !== 'string') continue;
    try {
      if (v.undefined) G[v.name] = undefined;
      else if ('json' in v) G[v.name] = v.json;
      else if (v.module !== undefined) {
        let m = v.how === 'import' ? await userImport(v.module) : userRequire(v.module);
        if (v.member !== undefined && v.member !== null) m = m[v.member];
        G[v.name] = m;
      } else if (v.def) { later.push(v); continue; } else continue;
      restored.push(v.name);
    } catch (e) {
      failed.push({ name: v.name, type: v.module !== undefined ? 'module ' + v.module : 'value', reason: errText(e) });
    }
  }
  for (const v of later) {
    const d = v.def;
    try {
      const code = d.kind === 'function' ? d.source : '(' + d.source + ')';
      const script = new vm.Script(code, {
        filename: d.file, lineOffset: Math.max(0, (d.line | 0) - 1),
        columnOffset: Math.max(0, (d.column | 0) - (d.kind === 'function' ? 0 : 1)),
      });
      const value = script.runInThisContext();
      const fn = d.kind === 'function' ? G[v.name] : value;
      if (d.kind !== 'function') G[v.name] = fn;
      if (typeof fn === 'function' && typeof v.fname === 'string' && fn.name !== v.fname) {
        Obj.defineProperty(fn, 'name', { value: v.fname, configurable: true });
      }
      defOf.set(fn, { kind: d.kind, source: d.source, file: d.file, line: d.line, column: d.column, order: ++defCounter });
      restored.push(v.name);
    } catch (e) {
      failed.push({ name: v.name, type: d.kind, reason: 'its source could not be evaluated again: ' + errText(e) });
    }
  }
  return { restored, failed };
}

// ------------------------------------------------------------------------------------- serve

async function handleLine(line) {
  let req;
  try {
    req = J.parse(line);
    if (!req || typeof req !== 'object' || Arr.isArray(req)) throw new Error('not a JSON object');
  } catch (e) {
    event({ op: 'error', id: null, error: 'bad request: ' + e.message });
    return;
  }
  try {
    switch (req.op) {
      case 'exec': await handleExec(req); break;
      case 'vars': handleVars(req); break;
      case 'snapshot': handleSnapshot(req); break;
      default: event({ op: 'error', id: req.id === undefined ? null : req.id, error: 'unknown op ' + J.stringify(req.op) });
    }
  } catch (e) {
    note('internal error: ' + (e && e.stack ? e.stack : errText(e)));
    try { event({ op: 'error', id: req.id === undefined ? null : req.id, error: 'internal error: ' + errText(e) }); } catch (_) { /* gone */ }
  }
}

async function main() {
  const { restored, failed } = await restore();
  try { lastFingerprint = collect().fingerprint; } catch (_) { lastFingerprint = null; }
  const queue = [];
  let busy = false;
  let ended = false;
  const pump = async () => {
    busy = true;
    while (queue.length > 0) await handleLine(queue.shift());
    busy = false;
    if (ended) proc.exit(0);
  };
  const ctrl = new net.Socket({ fd: REQ_FD, readable: true, writable: false });
  let buf = '';
  ctrl.setEncoding('utf8');
  ctrl.on('data', (chunk) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.trim() !== '') queue.push(line);
    }
    if (!busy && queue.length > 0) pump();
  });
  const end = () => {
    ended = true;
    if (!busy) proc.exit(0);
  };
  ctrl.on('end', end);
  ctrl.on('error', end);
  event({ op: 'ready', pid: proc.pid, restored, failed, info: INFO });
}

main().catch((e) => {
  note('the kernel could not start: ' + (e && e.stack ? e.stack : errText(e)));
  proc.exit(1);
});
