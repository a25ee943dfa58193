// A small renderer for this chart's templates, so that the chart is tested without
// helm (not a Debian package). It implements exactly the template subset the chart
// uses, with Helm's meaning, and refuses anything else:
//   {{ .Values.a.b }}  {{ .Release.Name|Namespace|Service }}  {{ .Chart.Name|Version|AppVersion }}
//   {{ x | quote }}  {{ x | nindent N }}  {{ toYaml x }}  {{ include "name" . }}
//   {{ not x }}  {{ and x y }}  {{ or x y }}  {{ gt x y }}  {{ int x }}  {{ fail "why" }}
//   (parenthesized pipelines as arguments)  {{/* comments */}}
//   {{- if x }} / {{- else }} / {{- end }}  {{- define "name" -}}
// with {{- and -}} trimming whitespace. values files: a YAML subset (maps, lists,
// scalars, `|` blocks, {} and []); later files override earlier ones key by key.
//
//   node render.mjs CHART [-f values.yaml]... [--release NAME] [--namespace NS]
//   node render.mjs --check [--gpuledger BINARY]
//                               renders the committed examples and compares them (with the
//                               binary: and has it read every config they carry)
//   node render.mjs --update    rewrites them
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {spawnSync} from 'node:child_process';
import {fileURLToPath} from 'node:url';

// ---- values: a YAML subset ----
function parseScalar(s, where) {
  if (s === '' || s === '~' || s === 'null') return null;
  if (s === 'true') return true;
  if (s === 'false') return false;
  if (s === '{}') return {};
  if (s === '[]') return [];
  if (/^-?\d+(\.\d+)?$/.test(s)) return Number(s);
  if (s.startsWith('"')) return JSON.parse(s);
  if (s.startsWith("'")) return s.slice(1, -1).replace(/''/g, "'");
  if (/^\[.*\]$/.test(s)) {
    const inner = s.slice(1, -1).trim();
    return inner === '' ? [] : inner.split(',').map((x) => parseScalar(x.trim(), where));
  }
  if (/^[{&*!|>%@`]/.test(s)) throw new Error(`${where}: unsupported YAML "${s}"`);
  return s;
}

function stripComment(line) {
  let quote = null;
  for (let i = 0; i < line.length; ++i) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (c === '#' && (i === 0 || line[i - 1] === ' ')) {
      return line.slice(0, i).trimEnd();
    }
  }
  return line.trimEnd();
}

export function parseValues(text, file) {
  const raw = text.split('\n');
  const lines = [];  // {indent, text, n}
  for (let n = 0; n < raw.length; ++n) lines.push({indent: raw[n].search(/\S|$/), raw: raw[n], n: n + 1});
  let i = 0;
  const significant = () => {
    while (i < lines.length && stripComment(lines[i].raw).trim() === '') ++i;
    return i < lines.length ? lines[i] : null;
  };
  function block(indent) {  // `|` block scalar: lines indented more than `indent`
    const out = [];
    let base = -1;
    while (i < lines.length) {
      const l = lines[i];
      if (l.raw.trim() !== '' && l.indent <= indent) break;
      if (l.raw.trim() !== '' && base < 0) base = l.indent;
      out.push(l.raw.trim() === '' ? '' : l.raw.slice(base));
      ++i;
    }
    while (out.length && out[out.length - 1] === '') out.pop();
    return out.length ? out.join('\n') + '\n' : '';
  }
  function node(indent) {
    const first = significant();
    if (!first || first.indent < indent) return null;
    const isList = stripComment(first.raw).trim().startsWith('- ') || stripComment(first.raw).trim() === '-';
    return isList ? list(first.indent) : map(first.indent);
  }
  function entry(obj, text, indent, where) {
    const m = /^("[^"]*"|[^:]+?):(\s+(.*))?$/.exec(text);
    if (!m) throw new Error(`${where}: want key: value`);
    const key = m[1].startsWith('"') ? JSON.parse(m[1]) : m[1];
    const rest = (m[3] || '').trim();
    if (rest === '|' || rest === '|-') {
      obj[key] = block(indent);
      if (rest === '|-') obj[key] = obj[key].replace(/\n$/, '');
    } else if (rest === '') {
      const child = node(indent + 1);
      obj[key] = child === null ? null : child;
    } else {
      obj[key] = parseScalar(rest, where);
    }
  }
  function map(indent) {
    const obj = {};
    for (let l = significant(); l && l.indent === indent; l = significant()) {
      const text = stripComment(l.raw).trim();
      if (text.startsWith('- ')) break;
      ++i;
      entry(obj, text, indent, `${file}:${l.n}`);
    }
    return obj;
  }
  function list(indent) {
    const arr = [];
    for (let l = significant(); l && l.indent === indent; l = significant()) {
      const text = stripComment(l.raw).trim();
      if (!text.startsWith('-')) break;
      ++i;
      const rest = text.slice(1).trim();
      if (rest === '') {
        arr.push(node(indent + 1));
      } else if (/^("[^"]*"|[^:"]+?):(\s|$)/.test(rest)) {
        const obj = {};
        entry(obj, rest, indent + 2, `${file}:${l.n}`);
        const more = significant();
        if (more && more.indent === indent + 2) Object.assign(obj, map(indent + 2));
        arr.push(obj);
      } else {
        arr.push(parseScalar(rest, `${file}:${l.n}`));
      }
    }
    return arr;
  }
  const v = node(0);
  if (significant()) throw new Error(`${file}:${lines[i].n}: unexpected indentation`);
  return v || {};
}

function merge(base, over) {
  if (over === null || typeof over !== 'object' || Array.isArray(over)) return over;
  const out = {...(base && typeof base === 'object' && !Array.isArray(base) ? base : {})};
  for (const [k, v] of Object.entries(over)) out[k] = merge(out[k], v);
  return out;
}

// ---- toYaml as Helm's (sigs.k8s.io/yaml: keys sorted, strings quoted when ambiguous) ----
function yamlString(s) {
  const ambiguous = s === '' || /^(true|false|yes|no|on|off|y|n|null|~)$/i.test(s) ||
      /^[-+]?(\d[\d_]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/.test(s) || /^0[xob]/i.test(s) ||
      /[:#]\s|:$|^[\s\-?:,\[\]{}#&*!|>'"%@`]|\s$/.test(s);
  return ambiguous ? JSON.stringify(s) : s;
}
function toYaml(v, indent = '') {
  if (v === null || v === undefined) return 'null';
  if (Array.isArray(v)) {
    if (!v.length) return '[]';
    return v.map((x) => {
      if (x && typeof x === 'object' && Object.keys(x).length) {
        const body = toYaml(x, indent + '  ');
        return `${indent}- ${body.slice(indent.length + 2)}`;
      }
      return `${indent}- ${toYaml(x, indent + '  ')}`;
    }).join('\n');
  }
  if (typeof v === 'object') {
    const keys = Object.keys(v).sort();
    if (!keys.length) return '{}';
    return keys.map((k) => {
      const x = v[k];
      if (x && typeof x === 'object' && (Array.isArray(x) ? x.length : Object.keys(x).length)) {
        return `${indent}${yamlString(k)}:\n${toYaml(x, Array.isArray(x) ? indent : indent + '  ')}`;
      }
      return `${indent}${yamlString(k)}: ${toYaml(x, indent + '  ')}`;
    }).join('\n');
  }
  if (typeof v === 'string') return yamlString(v);
  return String(v);
}

// ---- templates ----
function tokenize(text, file) {
  const out = [];
  const re = /\{\{(-?)\s*([\s\S]*?)\s*(-?)\}\}/g;
  let last = 0;
  for (let m; (m = re.exec(text));) {
    out.push({text: text.slice(last, m.index)});
    out.push({action: m[2], trimLeft: m[1] === '-', trimRight: m[3] === '-', file});
    last = re.lastIndex;
  }
  out.push({text: text.slice(last)});
  for (let k = 0; k < out.length; ++k) {
    if (out[k].action === undefined) continue;
    if (out[k].trimLeft && out[k - 1]) out[k - 1].text = out[k - 1].text.replace(/\s+$/, '');
    if (out[k].trimRight && out[k + 1]) out[k + 1].text = out[k + 1].text.replace(/^\s+/, '');
  }
  return out;
}

function parseTemplate(tokens) {
  let i = 0;
  const defines = {};
  function seq(stops) {
    const nodes = [];
    while (i < tokens.length) {
      const t = tokens[i];
      if (t.action === undefined) {
        nodes.push({text: t.text});
        ++i;
        continue;
      }
      const head = t.action.split(/\s+/)[0];
      if (stops.includes(head)) return nodes;
      ++i;
      if (t.action.startsWith('/*') && t.action.endsWith('*/')) continue;  // a comment
      if (head === 'if') {
        const node = {cond: t.action.slice(2).trim(), then: seq(['else', 'end']), else: []};
        if (tokens[i].action.startsWith('else')) {
          ++i;
          node.else = seq(['end']);
        }
        ++i;  // end
        nodes.push(node);
      } else if (head === 'define') {
        const name = JSON.parse(t.action.slice(6).trim());
        defines[name] = seq(['end']);
        ++i;
      } else if (head === 'else' || head === 'end') {
        throw new Error(`${t.file}: unexpected {{ ${t.action} }}`);
      } else {
        nodes.push({expr: t.action, file: t.file});
      }
    }
    return nodes;
  }
  return {nodes: seq([]), defines};
}

function makeContext(values, release, chart) {
  return {Values: values, Release: release, Chart: chart};
}

function lookup(ctx, ref, file) {
  let v = ctx;
  for (const part of ref.slice(1).split('.')) {
    if (v === null || typeof v !== 'object' || !(part in v)) throw new Error(`${file}: ${ref}: no such value`);
    v = v[part];
  }
  return v;
}

function truthy(v) {
  if (v === null || v === undefined || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}

function show(v) {
  if (v === null || v === undefined) return '<no value>';
  if (typeof v === 'object') throw new Error('a map or list printed as text (use toYaml)');
  return String(v);
}

// An action's pipeline: COMMAND ( | COMMAND )*, each command a function and its arguments
// (literals, references, parenthesized pipelines), the value of a stage passed as the last
// argument of the next, as in Go's text/template.
function tokenizeExpr(expr, file) {
  const re = /\s*("(?:[^"\\]|\\.)*"|\(|\)|\||-?\d+|[.\w$-]+)/y;
  const out = [];
  for (let m; re.lastIndex < expr.length && (m = re.exec(expr));) out.push(m[1]);
  if (out.join('').length !== expr.replace(/\s+/g, '').length) throw new Error(`${file}: cannot parse {{ ${expr} }}`);
  return out;
}

function parsePipeline(tokens, k, file, expr) {
  const stages = [];
  let words = [];
  for (; k.i < tokens.length; ++k.i) {
    const t = tokens[k.i];
    if (t === ')') break;
    if (t === '|') {
      stages.push(words);
      words = [];
    } else if (t === '(') {
      ++k.i;
      words.push({pipeline: parsePipeline(tokens, k, file, expr)});
      if (tokens[k.i] !== ')') throw new Error(`${file}: unbalanced ( in {{ ${expr} }}`);
    } else {
      words.push(t);
    }
  }
  stages.push(words);
  if (stages.some((w) => !w.length)) throw new Error(`${file}: empty command in {{ ${expr} }}`);
  return stages;
}

function evalArg(a, ctx, defines, file) {
  if (a.pipeline) return evalStages(a.pipeline, ctx, defines, file);
  if (a.startsWith('"')) return JSON.parse(a);
  if (/^-?\d+$/.test(a)) return Number(a);
  if (a === '.') return ctx;
  if (a.startsWith('.')) return lookup(ctx, a, file);
  throw new Error(`${file}: unsupported argument ${a}`);
}

const firstOr = (index, fallback) => (index < 0 ? fallback : index);

// The functions the chart uses, with Helm's (text/template's and sprig's) meaning.
const functions = {
  toYaml: (v) => toYaml(v),
  not: (v) => !truthy(v),
  and: (...vs) => vs[firstOr(vs.findIndex((v) => !truthy(v)), vs.length - 1)],
  or: (...vs) => vs[firstOr(vs.findIndex((v) => truthy(v)), vs.length - 1)],
  int: (v) => Math.trunc(Number(v)) || 0,
  gt: (a, b) => {
    if (typeof a !== 'number' || typeof b !== 'number') throw new Error(`gt: incompatible types (${a}, ${b})`);
    return a > b;
  },
  quote: (v) => JSON.stringify(show(v)),
  nindent: (n, v) => '\n' + show(v).split('\n').map((l) => ' '.repeat(n) + l).join('\n'),
  indent: (n, v) => show(v).split('\n').map((l) => ' '.repeat(n) + l).join('\n'),
};

function evalStages(stages, ctx, defines, file) {
  let piped;
  stages.forEach((words, n) => {
    const [head, ...rest] = words;
    const args = rest.map((a) => evalArg(a, ctx, defines, file));
    if (n > 0) args.push(piped);
    if (typeof head !== 'string' || head.startsWith('.') || head.startsWith('"') || head === '(') {
      if (args.length) throw new Error(`${file}: ${JSON.stringify(head)} is not a function`);
      piped = evalArg(head, ctx, defines, file);
    } else if (head === 'include') {
      if (!defines[args[0]]) throw new Error(`${file}: include: no template "${args[0]}"`);
      piped = render(defines[args[0]], args[1], defines, file);
    } else if (head === 'fail') {
      throw new Error(`${file}: ${show(args[0])}`);  // helm: "execution error at (FILE...): MESSAGE"
    } else if (functions[head]) {
      piped = functions[head](...args);
    } else {
      throw new Error(`${file}: unsupported function ${head}`);
    }
  });
  return piped;
}

function evalPipeline(expr, ctx, defines, file) {
  const tokens = tokenizeExpr(expr, file);
  const k = {i: 0};
  const stages = parsePipeline(tokens, k, file, expr);
  if (k.i !== tokens.length) throw new Error(`${file}: unbalanced ) in {{ ${expr} }}`);
  return evalStages(stages, ctx, defines, file);
}

function render(nodes, ctx, defines, file) {
  let out = '';
  for (const n of nodes) {
    if (n.text !== undefined) {
      out += n.text;
    } else if (n.cond !== undefined) {
      out += render(truthy(evalPipeline(n.cond, ctx, defines, file)) ? n.then : n.else, ctx, defines, file);
    } else {
      out += show(evalPipeline(n.expr, ctx, defines, n.file));
    }
  }
  return out;
}

export function renderChart(chartDir, valueFiles, release) {
  const chart = parseValues(fs.readFileSync(path.join(chartDir, 'Chart.yaml'), 'utf8'), 'Chart.yaml');
  let values = parseValues(fs.readFileSync(path.join(chartDir, 'values.yaml'), 'utf8'), 'values.yaml');
  for (const f of valueFiles) values = merge(values, parseValues(fs.readFileSync(f, 'utf8'), f));
  const ctx = makeContext(values, {Service: 'Helm', ...release},
                          {Name: chart.name, Version: chart.version, AppVersion: chart.appVersion});
  const dir = path.join(chartDir, 'templates');
  const files = fs.readdirSync(dir).sort();
  const defines = {};
  for (const f of files.filter((f) => f.endsWith('.tpl'))) {
    Object.assign(defines, parseTemplate(tokenize(fs.readFileSync(path.join(dir, f), 'utf8'), f)).defines);
  }
  let out = '';
  for (const f of files.filter((f) => f.endsWith('.yaml'))) {
    const t = parseTemplate(tokenize(fs.readFileSync(path.join(dir, f), 'utf8'), f));
    Object.assign(defines, t.defines);
    const text = render(t.nodes, ctx, defines, f).trim();
    if (text) out += `---\n# Source: ${chart.name}/templates/${f}\n${text}\n`;
  }
  return out;
}

// ---- the committed examples and their checks ----
const here = path.dirname(fileURLToPath(import.meta.url));
const chartDir = path.join(here, 'gpuledger');
const examples = [
  // The defaults: agent and server, SQLite on a volume.
  {out: path.join(here, 'rendered', 'default.yaml'), values: []},
  // Every option on: PostgreSQL by URL from an existing Secret, two servers, the tokens'
  // existing Secret, a ServiceMonitor.
  {out: path.join(here, 'rendered', 'full.yaml'), values: [path.join(here, 'ci', 'full-values.yaml')]},
  // PostgreSQL by URL in a Secret the chart makes, three servers.
  {out: path.join(here, 'rendered', 'postgresql.yaml'), values: [path.join(here, 'ci', 'postgresql-values.yaml')]},
  // The agent alone, for sites with their server elsewhere.
  {out: path.join(here, '..', 'daemonset.yaml'), values: [path.join(here, 'ci', 'agent-only-values.yaml')],
   header: '# The gpuledger agent as a DaemonSet, rendered from the Helm chart (deploy/helm/gpuledger)\n' +
           '# with deploy/helm/ci/agent-only-values.yaml; a test keeps them equal. Make the Secret\n' +
           '# gpuledger-tokens (key agent-token) first; docs/install.md has the steps.\n'},
];

function renderExample(e) {
  return (e.header || '') + renderChart(chartDir, e.values, {Name: 'gpuledger', Namespace: 'gpuledger'});
}

function documents(text) {
  return text.split(/^---$/m).map((d) => d.trim()).filter((d) => d && !/^(#.*\n?)*$/.test(d));
}
function kinds(text) {
  return documents(text).map((d) => /^kind: (\S+)$/m.exec(d)[1]);
}
function expect(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
}

// The document of `kind` (the first, or the one whose name is `name`).
function documentOf(text, kind, name) {
  return documents(text).find((d) => new RegExp(`^kind: ${kind}$`, 'm').test(d) &&
                                     (!name || new RegExp(`^  name: ${name}$`, 'm').test(d)));
}

// The rendering must fail, saying `why`.
function expectRefused(values, why) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuledger-helm-'));
  try {
    fs.writeFileSync(path.join(dir, 'values.yaml'), values);
    renderChart(chartDir, [path.join(dir, 'values.yaml')], {Name: 'gpuledger', Namespace: 'gpuledger'});
  } catch (err) {
    if (err.message.includes(why)) return 0;
    console.error(`refused, but not saying "${why}": ${err.message}`);
    return 1;
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
  }
  console.error(`rendered, though it should fail saying "${why}":\n${values}`);
  return 1;
}

// PostgreSQL by URL: no volume, several servers rolled one at a time, the URL only in a
// Secret; SQLite: one server, and more are refused.
function checkPostgres(def, pg) {
  const sqlite = documentOf(def, 'Deployment');
  expect(/^  replicas: 1$/m.test(sqlite) && sqlite.includes('type: Recreate'),
         'SQLite: one server, stopped before the next starts (its exclusive lock)');
  expect(!kinds(pg).includes('PersistentVolumeClaim') && kinds(pg).includes('PodDisruptionBudget'),
         `postgresql: no volume, a PodDisruptionBudget (${kinds(pg)})`);
  const server = documentOf(pg, 'Deployment');
  expect(/^  replicas: 3$/m.test(server), 'postgresql: the values\' three servers');
  expect(server.includes('type: RollingUpdate') && server.includes('maxUnavailable: 0'),
         'postgresql: a rolling update that keeps every ready server until its successor is ready');
  expect(server.includes('readinessProbe:\n            httpGet:\n              path: /healthz'),
         'postgresql: a readiness probe on /healthz');
  expect(server.includes('"--db-file", "/etc/gpuledger/store/url"') && server.includes('secretName: gpuledger-postgres') &&
             server.includes('emptyDir: {}'),
         'postgresql: the URL as a file from the chart\'s Secret, no volume');
  expect(documentOf(pg, 'PodDisruptionBudget').includes('minAvailable: 1'), 'postgresql: one server survives a drain');
  const holders = documents(pg).filter((d) => d.includes('PLACEHOLDER-PASSWORD'));
  expect(holders.length === 1 && /^kind: Secret$/m.test(holders[0]) && holders[0].includes('name: gpuledger-postgres'),
         'postgresql: the password only in the chart\'s Secret (not in arguments, environment or a ConfigMap)');
  expect(!documentOf(pg, 'Secret', 'gpuledger-tokens').includes('db = '),
         'postgresql: the server\'s config names no SQLite file');
  return expectRefused('server:\n  replicas: 2\n', 'server.replicas > 1 needs PostgreSQL') +
         expectRefused('server:\n  postgres:\n    existingSecret: a\n    url: "postgresql://x@y/z"\n',
                       'give existingSecret or url, not both') +
         expectRefused('server:\n  replicas: 0\n', 'server.replicas: at least 1');
}

// The TOML files a rendering carries (ConfigMap data, Secret stringData): {name, text}.
function tomlFiles(text) {
  const out = [];
  for (const d of documents(text).filter((d) => /^kind: (ConfigMap|Secret)$/m.test(d))) {
    const lines = d.split('\n');
    lines.forEach((line, k) => {
      const m = /^  (\S+\.toml): \|$/.exec(line);
      if (!m) return;
      const body = [];
      for (let j = k + 1; j < lines.length && (lines[j] === '' || lines[j].startsWith('    ')); ++j) body.push(lines[j].slice(4));
      out.push({name: m[1], text: body.join('\n') + '\n'});
    });
  }
  return out;
}

// Every config the chart writes is read by gpuledger's own config reader (every table
// checked, unknown keys refused), through a command that reads the whole file.
function checkConfigs(gpuledger, e, text) {
  let failures = 0;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuledger-helm-'));
  try {
    for (const f of tomlFiles(text)) {
      fs.writeFileSync(path.join(dir, f.name), f.text);
      const r = spawnSync(gpuledger, ['usage', '--config', path.join(dir, f.name), '--db', path.join(dir, 'ledger.db'),
                                      '--window', '1h'], {encoding: 'utf8'});
      if (r.status !== 0) {
        console.error(`${path.relative(here, e.out)}: ${f.name} is refused by gpuledger: ${r.stderr || r.error}`);
        ++failures;
      }
    }
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
  }
  return failures;
}

function check(gpuledger) {
  let failures = 0;
  const rendered = examples.map((e) => {
    const text = renderExample(e);
    const committed = fs.existsSync(e.out) ? fs.readFileSync(e.out, 'utf8') : '';
    if (text !== committed) {
      console.error(`${path.relative(here, e.out)} differs from what the chart renders ` +
                    '(node deploy/helm/render.mjs --update rewrites it)');
      ++failures;
    }
    return text;
  });
  const [def, full, pg, agentOnly] = rendered;
  const ds = documents(def).find((d) => /^kind: DaemonSet$/m.test(d));
  expect(ds.includes('path: /var/lib/kubelet/pod-resources'), 'the DaemonSet mounts the pod-resources folder');
  expect(ds.includes('nvidia.com/gpu.present: "true"'), 'the DaemonSet selects GPU nodes');
  expect(ds.includes('- effect: NoSchedule\n          key: nvidia.com/gpu\n          operator: Exists'),
         'the DaemonSet tolerates the GPU taint');
  expect(ds.includes('hostPID: true'), 'the agent sees the host\'s processes');
  expect(JSON.stringify(kinds(def)) === JSON.stringify(
             ['ConfigMap', 'DaemonSet', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Secret',
              'PersistentVolumeClaim', 'Deployment', 'Service']),
         `the defaults' kinds (${kinds(def)})`);
  expect(def.includes('claimName: gpuledger-server'), 'SQLite on a volume by default');
  expect(!def.includes('ServiceMonitor'), 'no ServiceMonitor by default');
  expect(kinds(full).includes('ServiceMonitor') && !kinds(full).includes('Secret') &&
             !kinds(full).includes('PersistentVolumeClaim'),
         'full: a ServiceMonitor, the existing Secret, no volume with PostgreSQL');
  expect(full.includes('"--db-file", "/etc/gpuledger/store/url"') && full.includes('secretName: ledger-postgres'),
         'full: the PostgreSQL URL from its Secret, as a file');
  failures += checkPostgres(def, pg);
  expect(tomlFiles(def).map((f) => f.name).join() === 'agent.toml,server.toml', 'the defaults carry both configs');
  if (gpuledger) examples.forEach((e, k) => { failures += checkConfigs(gpuledger, e, rendered[k]); });
  expect(JSON.stringify(kinds(agentOnly)) ===
             JSON.stringify(['ConfigMap', 'DaemonSet', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding']),
         `agent only: ${kinds(agentOnly)}`);

  // kubectl parses every document offline (kustomize: apiVersion, kind and name of each
  // object; `kubectl apply --dry-run=client` needs a server to map kinds).
  const kubectl = spawnSync('kubectl', ['version', '--client'], {encoding: 'utf8'});
  if (kubectl.error) {
    console.error('kubectl not found (Debian: kubernetes-client)');
    return process.env.CI === 'true' ? 1 : 77;
  }
  for (const e of examples) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuledger-helm-'));
    try {
      fs.copyFileSync(e.out, path.join(dir, 'manifests.yaml'));
      fs.writeFileSync(path.join(dir, 'kustomization.yaml'), 'resources:\n- manifests.yaml\n');
      const r = spawnSync('kubectl', ['kustomize', dir], {encoding: 'utf8'});
      const parsed = r.status === 0 ? documents(r.stdout).length : -1;
      if (parsed !== documents(fs.readFileSync(e.out, 'utf8')).length) {
        console.error(`kubectl kustomize ${path.relative(here, e.out)}: ${r.stderr}`);
        ++failures;
      }
    } finally {
      fs.rmSync(dir, {recursive: true, force: true});
    }
  }
  if (!failures) console.log(`chart: ${examples.length} renderings match and parse`);
  return failures ? 1 : 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  try {
    if (args[0] === '--check') {
      if (args.length > 1 && (args[1] !== '--gpuledger' || args.length !== 3)) throw new Error('--check [--gpuledger BINARY]');
      process.exit(check(args[2]));
    } else if (args[0] === '--update') {
      for (const e of examples) fs.writeFileSync(e.out, renderExample(e));
    } else {
      const values = [];
      const release = {Name: 'gpuledger', Namespace: 'default'};
      for (let k = 1; k < args.length; k += 2) {
        if (args[k] === '-f') values.push(args[k + 1]);
        else if (args[k] === '--release') release.Name = args[k + 1];
        else if (args[k] === '--namespace') release.Namespace = args[k + 1];
        else throw new Error(`unknown option ${args[k]}`);
      }
      process.stdout.write(renderChart(args[0], values, release));
    }
  } catch (err) {
    console.error(`render.mjs: ${err.message}`);
    process.exit(1);
  }
}
