#!/usr/bin/env bash
# Checks Dockerfile, .dockerignore and docker-compose.yml without a Docker engine.
#
#   scripts/check-containers.sh            all checks (about 1-2 minutes; needs npm registry access for `npm ci`)
#   scripts/check-containers.sh --static   only (a) and (b), a few seconds, no network
#   KEEP_WORK=1 scripts/check-containers.sh   keep the temp dir for inspection
#
# (a) compose:    parses docker-compose.yml as YAML (js-yaml from node_modules, else python3 PyYAML, else a
#                 line-based fallback) and asserts the structure; resolves ${VAR:-default} the way compose does
#                 with an empty environment, i.e. what a fresh checkout gets from `docker compose up`. The `scale`
#                 profile: its services (app instances, nginx, a Redis primary and replica, three sentinels), the
#                 config files it mounts (ops/compose/) agreeing with them, every variable an app sets being one
#                 the service's env schema or a module's config slice reads.
# (b) Dockerfile: hadolint when installed; always a structural lint (named multi-stage build, cache-friendly
#                 npm ci, prune, non-root runtime, HEALTHCHECK and CMD in exec form, no ADD of URLs, no baked
#                 secrets) plus the required .dockerignore entries.
# (c) replay:     builds the context the way docker would (git-visible files filtered by .dockerignore), then
#                 replays every stage of the Dockerfile itself (WORKDIR/ENV/COPY/RUN; RUN lines must be plain npm
#                 commands) into per-stage directories. The runtime stage's directory is then run with its CMD,
#                 its ENV, as the image's `node` user (uid 1000) and the environment docker-compose.yml gives the
#                 app, against a redis-server started with the compose file's redis command on a free port:
#                 /health/ready must answer 200 within 20 s, the image's HEALTHCHECK command must pass (and fail
#                 while Redis is unreachable), SIGTERM must drain and exit 0, and starting with no Redis
#                 settings must exit non-zero naming REDIS_URL.
set -Eeuo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODE="${1:-all}"
case "$MODE" in all | --static) ;; *) echo "usage: $0 [--static]" >&2; exit 2 ;; esac

WORK="$(mktemp -d "${TMPDIR:-/tmp}/redis-pay-containers.XXXXXX")"
chmod 755 "$WORK" # the replayed runtime runs as uid 1000 and must reach its files
mkdir -p "$WORK/logs"
: >"$WORK/pids"
REDIS_PID=""
STARTED_AT=$SECONDS

cleanup() {
  local rc=$?
  set +e
  # Processes this script started: the app instances (pids recorded by the runtime step) and redis-server.
  while read -r pid; do
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  done <"$WORK/pids"
  if [ -n "$REDIS_PID" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
    kill -TERM "$REDIS_PID" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$REDIS_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$REDIS_PID" 2>/dev/null
    wait "$REDIS_PID" 2>/dev/null
  fi
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "(kept $WORK)"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

section() { printf '\n== %s\n' "$*"; }
die() { printf '  FAIL  %s\n' "$*" >&2; exit 1; }

command -v node >/dev/null || die "node is required"
cd "$ROOT"
for f in Dockerfile .dockerignore docker-compose.yml package.json package-lock.json; do
  [ -f "$f" ] || die "missing $f"
done

# ---------------------------------------------------------------------------------------------------------------
# All checks live in one node helper with subcommands: compose | lint | context | replay | runtime.
cat >"$WORK/check.cjs" <<'JS'
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const cp = require('node:child_process');
const net = require('node:net');

const ROOT = process.env.CHECK_ROOT;
const WORK = process.env.CHECK_WORK;
let failures = 0;
const ok = (m) => console.log(`  ok    ${m}`);
const info = (m) => console.log(`  ..    ${m}`);
const bad = (m) => { failures++; console.log(`  FAIL  ${m}`); };
const check = (cond, m, why) => (cond ? ok(m) : bad(why ? `${m}: ${why}` : m));
const done = () => { if (failures) { console.log(`  ${failures} check(s) failed`); process.exit(1); } };
const readJson = (f) => JSON.parse(fs.readFileSync(f, 'utf8'));
const writeJson = (f, v) => fs.writeFileSync(f, JSON.stringify(v, null, 2));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- compose ---------------------------------------
/** Compose-style interpolation against `env` (an empty one: a fresh checkout with no .env and nothing exported). */
function interpolate(value, env, where, errors) {
  if (typeof value !== 'string') return value;
  return value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])((?:[^}])*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (m, name, op, arg, bare) => {
    if (m === '$$') return '$';
    if (bare) return env[bare] ?? '';
    const v = env[name];
    const unsetOrEmpty = v === undefined || v === '';
    switch (op) {
      case undefined: return v ?? '';
      case ':-': return unsetOrEmpty ? arg : v;
      case '-': return v === undefined ? arg : v;
      case ':+': return unsetOrEmpty ? '' : arg;
      case '+': return v === undefined ? '' : arg;
      case ':?': case '?':
        if (op === ':?' ? unsetOrEmpty : v === undefined) { errors.push(`${where}: \${${name}} is required (${arg || 'no message'})`); return ''; }
        return v;
    }
    return m;
  });
}

function toMap(envLike) {
  if (Array.isArray(envLike)) {
    const out = {};
    for (const e of envLike) { const i = String(e).indexOf('='); out[i < 0 ? e : e.slice(0, i)] = i < 0 ? undefined : e.slice(i + 1); }
    return out;
  }
  return { ...(envLike ?? {}) };
}

const DURATION_S = (d) => {
  if (typeof d === 'number') return d;
  let s = 0; const re = /(\d+(?:\.\d+)?)(h|ms|m|s|us|ns)/g; let m; let seen = false;
  while ((m = re.exec(String(d)))) { seen = true; s += Number(m[1]) * { h: 3600, m: 60, s: 1, ms: 1e-3, us: 1e-6, ns: 1e-9 }[m[2]]; }
  return seen ? s : NaN;
};

function loadYaml(file) {
  try {
    const yaml = require(require.resolve('js-yaml', { paths: [ROOT] }));
    return { doc: yaml.load(fs.readFileSync(file, 'utf8')), parser: `js-yaml ${require(require.resolve('js-yaml/package.json', { paths: [ROOT] })).version}` };
  } catch (e) {
    if (e && e.code !== 'MODULE_NOT_FOUND') throw e; // a YAML syntax error is a failure, not a reason to fall back
  }
  const py = cp.spawnSync('python3', ['-c', 'import sys,json,yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))', file], { encoding: 'utf8' });
  if (py.status === 0) return { doc: JSON.parse(py.stdout), parser: 'python3 PyYAML' };
  if (py.error || /No module named/.test(py.stderr)) return { doc: undefined, parser: undefined };
  throw new Error(`YAML parse failed: ${py.stderr.trim().split('\n').pop()}`);
}

function composeFallback(file) {
  // No YAML parser at all: line-based checks only (structure is not proven).
  const t = fs.readFileSync(file, 'utf8');
  info('no YAML parser available (js-yaml / PyYAML): line-based checks only');
  check(!/\t/.test(t), 'no tab characters (YAML forbids tabs for indentation)');
  check(/^services:\s*$/m.test(t) && /^  redis:\s*$/m.test(t) && /^  app:\s*$/m.test(t), 'services redis and app');
  check(/--appendonly yes/.test(t) && /--maxmemory-policy noeviction/.test(t) && /--maxmemory \S+/.test(t), 'redis: --appendonly yes, --maxmemory, noeviction');
  check(/:\/data\b/.test(t) && /^volumes:\s*$/m.test(t), 'redis: named volume on /data');
  check(/condition: service_healthy/.test(t), 'app depends_on redis service_healthy');
  check(/REDIS_URL[:=]\s*redis:\/\/redis:6379/.test(t), 'app REDIS_URL=redis://redis:6379');
  check(/init: true/.test(t), 'app init: true');
}

function cmdCompose() {
  const file = path.join(ROOT, 'docker-compose.yml');
  let parsed;
  try { parsed = loadYaml(file); } catch (e) { bad(`docker-compose.yml is not valid YAML: ${e.message.split('\n')[0]}`); return done(); }
  if (!parsed.parser) { composeFallback(file); writeJson(path.join(WORK, 'compose.json'), null); return done(); }
  ok(`docker-compose.yml parses as YAML (${parsed.parser})`);
  const doc = parsed.doc ?? {};
  const services = doc.services ?? {};
  const redis = services.redis;
  const app = services.app;
  check(redis && typeof redis === 'object', 'service "redis" defined');
  check(app && typeof app === 'object', 'service "app" defined');
  if (!redis || !app) return done();

  // Interpolate every string the way compose does, with an empty environment.
  if (fs.existsSync(path.join(ROOT, '.env'))) info('note: a .env next to docker-compose.yml would feed ${...} substitution; this check ignores it (fresh checkout)');
  const errors = [];
  const walk = (v, where) => (typeof v === 'string' ? interpolate(v, {}, where, errors)
    : Array.isArray(v) ? v.map((x, i) => walk(x, `${where}[${i}]`))
    : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, `${where}.${k}`)])) : v);
  const r = walk(redis, 'services.redis');
  const a = walk(app, 'services.app');
  check(errors.length === 0, 'works out of the box: every ${VAR} resolves with an empty environment', errors.join('; '));

  // redis
  check(/^redis:7(\b|[.-])/.test(String(r.image ?? '')), `redis image is Redis 7 (${r.image})`);
  const rcmd = Array.isArray(r.command) ? r.command.map(String) : String(r.command ?? '').trim().split(/\s+/).filter(Boolean);
  const argOf = (flag) => { const i = rcmd.indexOf(flag); return i >= 0 ? rcmd[i + 1] : undefined; };
  check(rcmd[0] === 'redis-server', 'redis command runs redis-server', `got ${JSON.stringify(rcmd[0])}`);
  check(argOf('--appendonly') === 'yes', 'redis --appendonly yes');
  check(argOf('--maxmemory-policy') === 'noeviction', 'redis --maxmemory-policy noeviction');
  check(/^\d+(k|kb|m|mb|g|gb)?$/i.test(argOf('--maxmemory') ?? ''), `redis --maxmemory set (${argOf('--maxmemory')})`);
  const vols = (r.volumes ?? []).map((v) => (typeof v === 'string' ? { source: v.split(':')[0], target: v.split(':')[1] } : v));
  const dataVol = vols.find((v) => v.target === '/data');
  check(dataVol && !/^[./~]/.test(dataVol.source) && doc.volumes && Object.hasOwn(doc.volumes, dataVol.source),
    `redis /data on a named volume declared under top-level volumes (${dataVol ? dataVol.source : 'none'})`);
  const rtest = [].concat(r.healthcheck?.test ?? []).join(' ');
  check(/redis-cli\b.*\bping\b/.test(rtest), `redis healthcheck uses redis-cli ping (${rtest})`);

  // app
  const build = typeof a.build === 'string' ? { context: a.build } : a.build ?? {};
  check(['.', './'].includes(build.context ?? '.') && a.build !== undefined, 'app builds from this directory');
  check(!build.dockerfile || build.dockerfile === 'Dockerfile', 'app uses ./Dockerfile');
  const ports = (a.ports ?? []).map((p) => (typeof p === 'object' ? `${p.published}:${p.target}` : String(p)));
  check(ports.some((p) => /(^|:)3000:3000(\/tcp)?$/.test(p)), `app publishes 3000:3000 (${ports.join(', ')})`);
  // The compose file's secrets are public EXAMPLE values that production accepts: published on every interface
  // (docker's default, past most host firewalls), anyone on the network could use its admin key (wallet top-ups).
  const hostIp = (p) => (typeof p === 'object' ? p.host_ip : /^(.*):\d+:\d+(\/tcp)?$/.exec(String(p))?.[1]);
  check((a.ports ?? []).every((p) => ['127.0.0.1', 'localhost', '::1', '[::1]'].includes(hostIp(p))),
    `app publishes its port on the loopback interface only (${ports.join(', ')}), as its example secrets are public`);
  const dep = Array.isArray(a.depends_on) ? {} : a.depends_on ?? {};
  check(dep.redis?.condition === 'service_healthy', 'app depends_on redis with condition service_healthy');
  check(a.init === true, 'app init: true (PID 1 forwards SIGTERM, reaps zombies)');
  const grace = DURATION_S(a.stop_grace_period ?? '10s');
  const env = toMap(a.environment);
  const drain = Number(env.SHUTDOWN_GRACE_MS ?? 10000) / 1000;
  check(grace > drain, `app stop_grace_period ${grace}s exceeds the app's drain limit ${drain}s`);
  check(!a.env_file || [].concat(a.env_file).every((f) => fs.existsSync(path.join(ROOT, typeof f === 'string' ? f : f.path)) || f.required === false),
    'app env_file (if any) exists or is optional');
  check(env.NODE_ENV === undefined || env.NODE_ENV === 'production', `app NODE_ENV is production (${env.NODE_ENV ?? 'image default'})`);
  let ru; try { ru = new URL(env.REDIS_URL); } catch { ru = undefined; }
  check(ru && ru.protocol === 'redis:' && ru.hostname === 'redis' && (ru.port || '6379') === '6379', `app REDIS_URL points at the redis service (${env.REDIS_URL})`);
  for (const k of ['REDIS_SENTINELS', 'REDIS_CLUSTER_NODES']) check(!env[k], `app sets no ${k} (exactly one topology)`);
  for (const k of ['JWT_SECRET', 'MERCHANT_SECRETS', 'SERVICE_TOKENS', 'ADMIN_API_KEYS']) {
    const raw = toMap(app.environment)[k];
    check(typeof env[k] === 'string' && env[k].length > 0, `app ${k} is provided`);
    check(/\$\{?[A-Z]/.test(String(raw)) && /EXAMPLE/.test(String(env[k])),
      `app ${k} is overridable and its default is visibly an EXAMPLE`, `raw ${JSON.stringify(raw)}`);
  }
  if (a.healthcheck) check(a.healthcheck.disable !== true, 'app does not disable the image HEALTHCHECK');

  checkScaleProfile(doc, walk, env);
  writeJson(path.join(WORK, 'compose.json'), { redisCommand: rcmd, appEnv: env, stopGraceS: grace, readOnly: a.read_only === true });
  done();
}

/** A service with its YAML merge keys (`<<: *anchor`) applied the way compose does: the service's own keys win. */
function merged(svc) {
  if (!svc || typeof svc !== 'object') return svc;
  const bases = [].concat(svc['<<'] ?? []);
  const own = Object.fromEntries(Object.entries(svc).filter(([k]) => k !== '<<'));
  return Object.assign({}, ...bases.map(merged), own);
}

/** Every variable the service reads: the fields of the platform's env schema and of each module's config slice. */
function envSchemaNames() {
  const files = [path.join(ROOT, 'src/platform/config/env.schema.ts')];
  const walkDir = (d) => { for (const e of fs.readdirSync(d, { withFileTypes: true })) { const f = path.join(d, e.name); if (e.isDirectory()) walkDir(f); else if (/\.config\.ts$/.test(e.name)) files.push(f); } };
  walkDir(path.join(ROOT, 'src'));
  const names = new Set();
  for (const f of files) for (const m of fs.readFileSync(f, 'utf8').matchAll(/^  ([A-Z][A-Z0-9_]*)[?!]?:/gm)) names.add(m[1]);
  return names;
}

/**
 * The `scale` profile: three app instances (two at least) behind an nginx load balancer, on Redis Sentinel (a
 * primary, a replica, three sentinels). Its services exist and are in the profile (so a plain `docker compose up`
 * starts none of them), the config files they mount exist and agree with the services (the sentinels watch the
 * primary under the master name the apps ask for; nginx balances over exactly the app instances), and every
 * variable an app instance sets is one the service reads.
 */
function checkScaleProfile(doc, walk, defaultAppEnv) {
  const all = Object.fromEntries(Object.entries(doc.services ?? {}).map(([n, svc]) => [n, walk(merged(svc), `services.${n}`)]));
  const inScale = (n) => [].concat(all[n]?.profiles ?? []).includes('scale');
  const scale = Object.keys(all).filter(inScale);
  check(!inScale('redis') && !inScale('app') && !all.redis?.profiles && !all.app?.profiles, 'the default services (redis, app) are in no profile: `docker compose up` is unchanged');
  if (scale.length === 0) return bad('profile "scale" has services');
  const apps = scale.filter((n) => /^app-\d+$/.test(n));
  const sentinels = scale.filter((n) => /^sentinel-\d+$/.test(n));
  for (const n of ['redis-primary', 'redis-replica', 'lb']) check(inScale(n), `scale: service "${n}" in the profile`);
  check(apps.length >= 2 && apps.length <= 3, `scale: two or three app instances (${apps.join(', ')})`);
  check(sentinels.length === 3, `scale: three sentinels (${sentinels.join(', ')})`);
  const schema = envSchemaNames();
  check(schema.has('REDIS_SENTINELS') && schema.has('NODE_ENV'), `the env schema is read (${schema.size} variables)`);

  // Files the profile mounts: every bind mount's source exists.
  for (const n of scale) {
    for (const v of all[n].volumes ?? []) {
      const src = typeof v === 'string' ? v.split(':')[0] : v.source;
      if (/^[./]/.test(src)) check(fs.existsSync(path.join(ROOT, src)), `scale: ${n} mounts ${src}, which exists`);
    }
  }

  // Redis nodes: AOF and noeviction as the standalone one; the replica follows the primary.
  const argsOf = (n) => (Array.isArray(all[n]?.command) ? all[n].command.map(String) : String(all[n]?.command ?? '').trim().split(/\s+/));
  for (const n of ['redis-primary', 'redis-replica']) {
    const c = argsOf(n);
    const arg = (f) => c[c.indexOf(f) + 1];
    check(c[0] === 'redis-server' && arg('--appendonly') === 'yes' && arg('--maxmemory-policy') === 'noeviction', `scale: ${n} runs redis-server with AOF and noeviction`);
    check([].concat(all[n].healthcheck?.test ?? []).join(' ').includes('ping'), `scale: ${n} has a ping healthcheck`);
  }
  const rc = argsOf('redis-replica');
  check(rc[rc.indexOf('--replicaof') + 1] === 'redis-primary' && rc[rc.indexOf('--replicaof') + 2] === '6379', 'scale: redis-replica --replicaof redis-primary 6379');

  // Sentinels: the mounted config watches redis-primary:6379 with a quorum of two, under the apps' master name.
  const confOf = (n) => {
    const v = (all[n].volumes ?? []).map((x) => (typeof x === 'string' ? x.split(':')[0] : x.source)).find((x) => /sentinel\.conf$/.test(x));
    return v && fs.existsSync(path.join(ROOT, v)) ? fs.readFileSync(path.join(ROOT, v), 'utf8') : '';
  };
  const masterNames = new Set();
  for (const n of sentinels) {
    const m = /^sentinel monitor (\S+) (\S+) (\d+) (\d+)$/m.exec(confOf(n));
    check(m && m[2] === 'redis-primary' && m[3] === '6379' && Number(m[4]) === 2, `scale: ${n} monitors redis-primary:6379 with quorum 2`, m ? m[0] : 'no sentinel monitor line');
    check(/^sentinel resolve-hostnames yes$/m.test(confOf(n)), `scale: ${n} resolves service names`);
    check(/redis-sentinel\b/.test([].concat(all[n].command ?? []).join(' ')), `scale: ${n} runs redis-sentinel`);
    if (m) masterNames.add(m[1]);
  }

  // App instances: the Sentinel topology (exactly one), the sentinels of this profile, production, hardened.
  const sentinelList = sentinels.map((n) => `${n}:26379`).sort().join(',');
  for (const n of apps) {
    const a = all[n];
    const env = toMap(a.environment);
    const unknown = Object.keys(env).filter((k) => !schema.has(k));
    check(unknown.length === 0, `scale: ${n} sets only variables the service reads`, `unknown: ${unknown.join(', ')}`);
    check(env.NODE_ENV === 'production', `scale: ${n} NODE_ENV=production`);
    check(!env.REDIS_URL && !env.REDIS_CLUSTER_NODES, `scale: ${n} sets no REDIS_URL / REDIS_CLUSTER_NODES (exactly one topology)`);
    check(String(env.REDIS_SENTINELS ?? '').split(',').sort().join(',') === sentinelList, `scale: ${n} REDIS_SENTINELS lists the profile's sentinels (${env.REDIS_SENTINELS})`);
    check(masterNames.size === 1 && masterNames.has(env.REDIS_SENTINEL_MASTER), `scale: ${n} REDIS_SENTINEL_MASTER is the sentinels' master (${env.REDIS_SENTINEL_MASTER})`);
    check(Number(env.DURABILITY_REPLICAS ?? 0) <= 1, `scale: ${n} DURABILITY_REPLICAS (${env.DURABILITY_REPLICAS ?? 0}) within the profile's one replica`);
    for (const k of ['JWT_SECRET', 'MERCHANT_SECRETS', 'SERVICE_TOKENS', 'ADMIN_API_KEYS'])
      check(env[k] === defaultAppEnv[k], `scale: ${n} ${k} is the app's (one set of example secrets)`);
    check(a.image === all.app.image && a.build !== undefined, `scale: ${n} builds the app's image (${a.image})`);
    check(a.init === true && a.read_only === true, `scale: ${n} init and read-only as the app`);
    for (const d of ['redis-replica', ...sentinels]) check(a.depends_on?.[d]?.condition === 'service_healthy', `scale: ${n} waits for ${d} to be healthy`);
  }
  const defaultUnknown = Object.keys(defaultAppEnv).filter((k) => !schema.has(k));
  check(defaultUnknown.length === 0, 'app sets only variables the service reads', `unknown: ${defaultUnknown.join(', ')}`);

  // Load balancer: nginx over exactly the app instances, published on loopback only.
  const lb = all.lb;
  if (!lb) return;
  check(/^nginx:/.test(String(lb.image)), `scale: lb is nginx (${lb.image})`);
  const confSrc = (lb.volumes ?? []).map((x) => (typeof x === 'string' ? x.split(':')[0] : x.source)).find((x) => /nginx\.conf$/.test(x));
  const conf = confSrc && fs.existsSync(path.join(ROOT, confSrc)) ? fs.readFileSync(path.join(ROOT, confSrc), 'utf8') : '';
  const upstream = [...conf.replace(/#.*$/gm, '').matchAll(/^\s*server\s+([\w.-]+):(\d+)/gm)].map((m) => `${m[1]}:${m[2]}`).sort();
  check(upstream.join(',') === apps.map((n) => `${n}:3000`).sort().join(','), `scale: nginx balances over exactly the app instances (${upstream.join(', ')})`);
  const listen = /^\s*listen\s+(\d+)/m.exec(conf)?.[1];
  const lbPorts = (lb.ports ?? []).map(String);
  check(lbPorts.length > 0 && lbPorts.every((p) => /^127\.0\.0\.1:\d+:\d+$/.test(p) && p.endsWith(`:${listen}`)), `scale: lb publishes nginx's port ${listen} on loopback only (${lbPorts.join(', ')})`);
  for (const n of apps) check(lb.depends_on?.[n]?.condition === 'service_healthy', `scale: lb waits for ${n} to be healthy`);
  for (const v of Object.keys(doc.volumes ?? {})) info(`volume ${v}`);
}

// ---------------------------------------------------------------- Dockerfile parsing ----------------------------
function logicalLines(text) {
  const out = [];
  let buf = null; let start = 0;
  text.split(/\r?\n/).forEach((raw, i) => {
    if (/^\s*#/.test(raw)) return; // comments (and parser directives) are dropped, also inside continuations
    if (buf === null) { if (!raw.trim()) return; buf = ''; start = i + 1; }
    if (/\\\s*$/.test(raw)) { buf += raw.replace(/\\\s*$/, ' '); return; }
    buf += raw;
    out.push({ line: start, text: buf.trim() });
    buf = null;
  });
  if (buf !== null && buf.trim()) out.push({ line: start, text: buf.trim() });
  return out.map(({ line, text }) => {
    const m = text.match(/^(\S+)\s*([\s\S]*)$/);
    return { line, instr: m[1].toUpperCase(), args: m[2].trim() };
  });
}

function subst(s, vars) {
  return s.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([-+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (m, n, op, arg, bare) => {
    const v = vars[n ?? bare];
    if (op === '-') return v ? v : arg;
    if (op === '+') return v ? arg : '';
    return v ?? '';
  });
}

function flags(args) {
  const f = {}; let rest = args;
  let m;
  while ((m = rest.match(/^--([a-z-]+)(?:=(\S*))?\s+/))) { (f[m[1]] ??= []).push(m[2] ?? true); rest = rest.slice(m[0].length); }
  return { f, rest: rest.trim() };
}

function execForm(s) {
  if (!s.trim().startsWith('[')) return undefined;
  try { const v = JSON.parse(s); return Array.isArray(v) && v.every((x) => typeof x === 'string') ? v : undefined; } catch { return undefined; }
}

/** `ENV a=b c="d e"` or legacy `ENV a b`. */
function envPairs(args) {
  const toks = []; let cur = ''; let q = null; let any = false;
  for (let i = 0; i < args.length; i++) {
    const c = args[i];
    if (q) { if (c === q) q = null; else if (c === '\\' && q === '"' && i + 1 < args.length) cur += args[++i]; else cur += c; continue; }
    if (c === '"' || c === "'") { q = c; any = true; continue; }
    if (c === '\\' && i + 1 < args.length) { cur += args[++i]; any = true; continue; }
    if (/\s/.test(c)) { if (cur || any) toks.push(cur); cur = ''; any = false; continue; }
    cur += c; any = true;
  }
  if (cur || any) toks.push(cur);
  if (toks.length && !toks[0].includes('=')) return [[toks[0], args.slice(args.indexOf(toks[0]) + toks[0].length).trim()]];
  return toks.map((t) => { const i = t.indexOf('='); return [t.slice(0, i), t.slice(i + 1)]; });
}

function parseDockerfile(file) {
  const instrs = logicalLines(fs.readFileSync(file, 'utf8'));
  const globalArgs = {}; const stages = [];
  let cur = null;
  for (const ins of instrs) {
    if (ins.instr === 'FROM') {
      const { rest } = flags(ins.args + ' ');
      const m = rest.match(/^(\S+)(?:\s+AS\s+(\S+))?$/i);
      if (!m) throw new Error(`line ${ins.line}: cannot parse FROM ${ins.args}`);
      cur = { index: stages.length, name: m[2] ? m[2].toLowerCase() : String(stages.length), named: !!m[2], rawImage: m[1], image: subst(m[1], globalArgs), line: ins.line, instrs: [] };
      stages.push(cur);
    } else if (!cur) {
      if (ins.instr !== 'ARG') throw new Error(`line ${ins.line}: ${ins.instr} before the first FROM`);
      const [k, v] = ins.args.split('='); globalArgs[k.trim()] = v === undefined ? undefined : v.trim().replace(/^"(.*)"$/, '$1');
    } else cur.instrs.push(ins);
  }
  return { instrs, globalArgs, stages };
}

// ---------------------------------------------------------------- .dockerignore ----------------------------------
function globToRe(p) {
  let re = '';
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    if (c === '*' && p[i + 1] === '*') {
      i++;
      if (p[i + 1] === '/') { i++; re += '(?:.*/)?'; } else re += '.*';
    } else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') { const j = p.indexOf(']', i); if (j < 0) re += '\\['; else { re += '[' + p.slice(i + 1, j).replace(/^!/, '^') + ']'; i = j; } }
    else if (c === '\\' && i + 1 < p.length) re += '\\' + p[++i];
    else re += c.replace(/[.+^${}()|/]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

function dockerignore(file) {
  const pats = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split(/\r?\n/).map((l) => l.trim()).filter((l) => l && !l.startsWith('#')) : [];
  const rules = pats.map((raw) => {
    const neg = raw.startsWith('!');
    const p = path.posix.normalize((neg ? raw.slice(1) : raw).trim()).replace(/^\/+/, '').replace(/\/+$/, '');
    return { raw, neg, p, re: globToRe(p) };
  });
  /** Docker semantics: the last matching rule wins; a rule matches a path or any of its parent directories. */
  const excluded = (rel) => {
    const parts = rel.split('/');
    let ex = false;
    for (const r of rules) {
      let hit = false;
      for (let n = parts.length; n >= 1 && !hit; n--) hit = r.re.test(parts.slice(0, n).join('/'));
      if (hit) ex = !r.neg;
    }
    return ex;
  };
  const mayReinclude = (dir) => rules.some((r) => r.neg && (r.p.startsWith(dir + '/') || r.p.includes('**')));
  return { rules, excluded, mayReinclude };
}

// ---------------------------------------------------------------- lint -------------------------------------------
function cmdLint() {
  const df = path.join(ROOT, 'Dockerfile');
  let parsed;
  try { parsed = parseDockerfile(df); } catch (e) { bad(`Dockerfile parses: ${e.message}`); return done(); }
  const { stages, instrs, globalArgs } = parsed;
  ok(`Dockerfile parses: ${instrs.length} instructions, ${stages.length} stages (${stages.map((s) => s.name).join(' -> ')})`);
  const known = new Set(['FROM', 'ARG', 'ENV', 'WORKDIR', 'COPY', 'ADD', 'RUN', 'USER', 'EXPOSE', 'HEALTHCHECK', 'CMD', 'ENTRYPOINT', 'LABEL', 'STOPSIGNAL', 'VOLUME', 'SHELL', 'ONBUILD', 'MAINTAINER']);
  const unknown = instrs.filter((i) => !known.has(i.instr));
  check(unknown.length === 0, 'only known instructions', unknown.map((i) => `line ${i.line}: ${i.instr}`).join(', '));
  check(!instrs.some((i) => i.instr === 'MAINTAINER'), 'no deprecated MAINTAINER');

  check(stages.length >= 3, 'multi-stage build (deps, build, runtime)', `${stages.length} stage(s)`);
  check(stages.every((s) => s.named), 'every FROM names its stage (FROM ... AS name)');
  check(new Set(stages.map((s) => s.name)).size === stages.length, 'stage names are unique');
  for (const s of stages) {
    check(/^node:20(\.\d+)*-bookworm-slim(@sha256:[0-9a-f]{64})?$/.test(s.image), `stage ${s.name} FROM ${s.image} (node:20-bookworm-slim family)`, `raw ${s.rawImage}`);
  }
  check(!stages.some((s) => /:latest\b/.test(s.image) || !/[:@]/.test(s.image)), 'no untagged or :latest base images');
  for (const [k, v] of Object.entries(globalArgs)) check(v !== undefined, `global ARG ${k} has a default`);

  const adds = instrs.filter((i) => i.instr === 'ADD');
  check(!adds.some((i) => /(^|\s)(https?:\/\/|git@|[a-z+]+:\/\/)/i.test(i.args)), 'no ADD of remote URLs');
  check(adds.length === 0, 'COPY rather than ADD', adds.map((i) => `line ${i.line}`).join(', '));
  check(instrs.filter((i) => i.instr === 'WORKDIR').every((i) => i.args.startsWith('/')), 'WORKDIR paths are absolute');

  // COPY --from must name an earlier stage.
  stages.forEach((s, si) => s.instrs.filter((i) => i.instr === 'COPY').forEach((i) => {
    const from = flags(i.args + ' ').f.from?.[0];
    if (from) check(stages.slice(0, si).some((p) => p.name === String(from).toLowerCase()), `line ${i.line}: COPY --from=${from} names an earlier stage`);
  }));

  // Secrets must not be baked in.
  const secretName = /(SECRET|TOKEN|PASSWORD|PASSWD|API_KEY|PRIVATE|CREDENTIAL|JWT_|MERCHANT_|ADMIN_)/i;
  const envs = instrs.filter((i) => i.instr === 'ENV' || i.instr === 'ARG').flatMap((i) => (i.instr === 'ENV' ? envPairs(i.args) : [i.args.split('=')]).map(([k]) => ({ k, line: i.line })));
  const leaked = envs.filter(({ k }) => secretName.test(k));
  check(leaked.length === 0, 'no ENV/ARG with secret-like names', leaked.map((e) => `line ${e.line}: ${e.k}`).join(', '));
  check(!envs.some(({ k }) => /^REDIS_(URL|SENTINELS|CLUSTER_NODES|PASSWORD)$/.test(k)), 'no Redis address or password baked in');
  const copiesEnv = instrs.filter((i) => (i.instr === 'COPY' || i.instr === 'ADD') && /(^|[\s/])\.env\b/.test(i.args));
  check(copiesEnv.length === 0, 'no COPY of .env files');
  check(!instrs.some((i) => i.instr === 'COPY' && /^\.\s+\.\/?$|^\.\s+\/app\/?$/.test(flags(i.args + ' ').rest)), 'no blanket `COPY . .` (explicit inputs keep layers cacheable and secrets out)');

  // Cache-friendly dependency install: the first npm ci runs after copying only package*.json.
  const ciStage = stages.find((s) => s.instrs.some((i) => i.instr === 'RUN' && /\bnpm ci\b/.test(i.args)));
  check(!!ciStage, 'a stage runs npm ci');
  if (ciStage) {
    const before = ciStage.instrs.slice(0, ciStage.instrs.findIndex((i) => i.instr === 'RUN' && /\bnpm ci\b/.test(i.args)));
    const copied = before.filter((i) => i.instr === 'COPY').flatMap((i) => { const t = flags(i.args + ' ').rest.split(/\s+/); return t.slice(0, -1); });
    check(copied.length > 0 && copied.every((c) => /^(\.\/)?package(-lock|\*)?\.json$|^(\.\/)?package\*\.json$/.test(c)), `stage ${ciStage.name}: only package*.json copied before npm ci`, `copied ${copied.join(' ')}`);
  }
  const runs = instrs.filter((i) => i.instr === 'RUN').map((i) => i.args).join('\n');
  check(/\bnpm run build\b/.test(runs), 'a stage runs npm run build');
  check(/\bnpm prune\b[^\n]*--omit=dev|\bnpm ci\b[^\n]*--omit=dev/.test(runs), 'dev dependencies are dropped (npm prune --omit=dev)');

  // Runtime (final) stage.
  const fin = stages[stages.length - 1];
  const fi = (name) => fin.instrs.filter((i) => i.instr === name);
  const users = fi('USER');
  const lastUser = users.length ? users[users.length - 1].args.trim() : 'root';
  check(users.length > 0 && !/^(root|0)(:|$)/.test(lastUser), `final stage runs as a non-root user (USER ${lastUser})`);
  const finEnv = Object.fromEntries(fi('ENV').flatMap((i) => envPairs(i.args)));
  check(finEnv.NODE_ENV === 'production', 'final stage ENV NODE_ENV=production');
  check(fi('EXPOSE').some((i) => /\b3000\b/.test(i.args)), 'final stage EXPOSE 3000');
  check(fi('RUN').length === 0, 'final stage has no RUN (nothing executes as root at build time there)');
  const hcs = fi('HEALTHCHECK');
  check(hcs.length === 1, 'final stage has one HEALTHCHECK');
  if (hcs.length) {
    const { f, rest } = flags(hcs[0].args + ' ');
    const m = rest.match(/^CMD\s+([\s\S]*)$/i);
    const argv = m && execForm(m[1]);
    check(!!argv, 'HEALTHCHECK CMD is exec form (no shell needed)');
    if (argv) {
      check(!/\b(curl|wget)\b/.test(argv.join(' ')), 'HEALTHCHECK does not rely on curl/wget (absent from slim images)');
      check(/\/health\/ready\b/.test(argv.join(' ')), 'HEALTHCHECK probes /health/ready');
      check(/process\.env\.PORT/.test(argv.join(' ')), 'HEALTHCHECK follows $PORT');
    }
    const t = DURATION_S(f.timeout?.[0] ?? '30s'); const iv = DURATION_S(f.interval?.[0] ?? '30s');
    check(t < iv, `HEALTHCHECK timeout ${t}s < interval ${iv}s`);
  }
  const cmds = fi('CMD');
  const cmd = cmds.length ? execForm(cmds[cmds.length - 1].args) : undefined;
  check(!!cmd, 'final stage CMD is exec form (node gets SIGTERM directly)');
  check(cmd && cmd[0] === 'node' && cmd[1] === 'dist/main.js', `CMD runs node dist/main.js (${JSON.stringify(cmd)})`);
  const eps = fi('ENTRYPOINT');
  check(eps.every((i) => execForm(i.args)), 'no shell-form ENTRYPOINT');
  const finCopies = fi('COPY').map((i) => ({ ...flags(i.args + ' '), line: i.line }));
  check(finCopies.every((c) => c.f.from), 'final stage copies only from earlier stages (never from the build context)');
  const srcs = finCopies.flatMap((c) => c.rest.split(/\s+/).slice(0, -1)).map((s) => path.posix.basename(s)).sort();
  check(JSON.stringify(srcs) === JSON.stringify(['dist', 'lua', 'node_modules', 'package.json']), `final stage copies exactly dist, lua, node_modules, package.json`, `got ${srcs.join(', ')}`);

  // .dockerignore
  const di = dockerignore(path.join(ROOT, '.dockerignore'));
  const lines = new Set(di.rules.filter((r) => !r.neg).map((r) => r.p.replace(/^\*\*\//, '')));
  for (const need of ['node_modules', 'dist', '.git', '.data', 'coverage', 'bench/results', 'test', '*.log', '.env']) {
    check(lines.has(need), `.dockerignore excludes ${need}`);
  }
  for (const p of ['node_modules/x/y.js', 'dist/main.js', '.git/HEAD', '.env', 'test/a.spec.ts', 'bench/results/r.json', 'x.log', 'src/deep/y.log', '.data/redis/appendonly.aof', 'coverage/lcov.info']) {
    check(di.excluded(p), `.dockerignore matcher excludes ${p}`);
  }
  for (const p of ['src/main.ts', 'lua/platform/core/rate-limit-1.lua', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'nest-cli.json', 'Dockerfile']) {
    check(!di.excluded(p), `.dockerignore keeps ${p}`);
  }
  done();
}

// ---------------------------------------------------------------- context ----------------------------------------
function cmdContext() {
  const di = dockerignore(path.join(ROOT, '.dockerignore'));
  // 1) What `docker build .` would really send: walk the directory, apply .dockerignore.
  const real = []; let bytes = 0;
  const walk = (rel) => {
    for (const e of fs.readdirSync(path.join(ROOT, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) { if (!di.excluded(r) || di.mayReinclude(r)) walk(r); continue; }
      if (!di.excluded(r)) { real.push(r); bytes += fs.lstatSync(path.join(ROOT, r)).size; }
    }
  };
  walk('');
  const leaks = real.filter((f) => /^(node_modules|dist|\.git|\.data|coverage|test)\//.test(f) || /(^|\/)\.env(\..+)?$/.test(f) && !/\.env\.example$/.test(f) || /\.log$/.test(f));
  check(leaks.length === 0, `real build context: ${real.length} files, ${(bytes / 1024).toFixed(0)} KiB, no node_modules/dist/.git/.env/test/logs`, leaks.slice(0, 5).join(', '));

  // 2) The reproducible context the replay uses: git-visible files (tracked + untracked-not-ignored), minus .dockerignore.
  let files;
  const g = cp.spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (g.status === 0) files = g.stdout.split('\0').filter(Boolean).filter((f) => fs.existsSync(path.join(ROOT, f)));
  else { info('not a git checkout: using the directory walk'); files = real; }
  const ctx = path.join(WORK, 'context');
  let n = 0;
  for (const f of files) {
    if (di.excluded(f)) continue;
    const dst = path.join(ctx, f);
    fs.mkdirSync(path.dirname(dst), { recursive: true });
    fs.cpSync(path.join(ROOT, f), dst, { preserveTimestamps: true, verbatimSymlinks: true });
    n++;
  }
  ok(`replay context: ${n} git-visible files after .dockerignore -> ${ctx}`);
  done();
}

// ---------------------------------------------------------------- replay -----------------------------------------
function cmdReplay() {
  const { stages } = parseDockerfile(path.join(ROOT, 'Dockerfile'));
  const ctx = path.join(WORK, 'context');
  const fsRoot = (s) => path.join(WORK, 'fs', s.name);
  const host = (s, p) => path.join(fsRoot(s), p);
  const sh = (args) => { const r = cp.spawnSync(args[0], args.slice(1), { stdio: 'inherit' }); if (r.status !== 0) throw new Error(`${args.join(' ')} failed`); };
  const byName = new Map();
  const globExpand = (base, rel) => {
    const parts = rel.replace(/^\/+/, '').split('/').filter((x) => x && x !== '.');
    let acc = [''];
    for (const part of parts) {
      const re = /[*?[]/.test(part) ? globToRe(part) : null;
      acc = acc.flatMap((a) => {
        if (!re) return fs.existsSync(path.join(base, a, part)) ? [path.join(a, part)] : [];
        try { return fs.readdirSync(path.join(base, a)).filter((n) => re.test(n)).map((n) => path.join(a, n)); } catch { return []; }
      });
    }
    return acc.filter((a) => a !== '' || parts.length === 0);
  };
  let summary = null;
  for (const s of stages) {
    const t0 = Date.now();
    fs.mkdirSync(fsRoot(s), { recursive: true });
    let workdir = '/'; const env = {}; let user = 'root'; let healthcheck = null; let cmd = null; const expose = [];
    console.log(`  --    stage ${s.name} (FROM ${s.image})`);
    for (const ins of s.instrs) {
      const where = `line ${ins.line}`;
      switch (ins.instr) {
        case 'WORKDIR': workdir = path.posix.resolve(workdir, subst(ins.args, env)); fs.mkdirSync(host(s, workdir), { recursive: true }); break;
        case 'ENV': for (const [k, v] of envPairs(ins.args)) env[k] = subst(v, env); break;
        case 'ARG': break;
        case 'LABEL': case 'STOPSIGNAL': break;
        case 'USER': user = ins.args.trim(); break;
        case 'EXPOSE': expose.push(...ins.args.split(/\s+/)); break;
        case 'CMD': cmd = execForm(ins.args); if (!cmd) throw new Error(`${where}: CMD must be exec form to replay`); break;
        case 'HEALTHCHECK': {
          const { f, rest } = flags(ins.args + ' ');
          const m = rest.match(/^CMD\s+([\s\S]*)$/i);
          healthcheck = { argv: m && execForm(m[1]), timeoutS: DURATION_S(f.timeout?.[0] ?? '30s') };
          break;
        }
        case 'COPY': {
          const { f, rest } = flags(ins.args + ' ');
          const toks = rest.split(/\s+/).map((x) => subst(x, env));
          const dest = toks.pop();
          const from = f.from?.[0] && byName.get(String(f.from[0]).toLowerCase());
          if (f.from && !from) throw new Error(`${where}: unknown stage ${f.from[0]}`);
          const base = from ? path.join(WORK, 'fs', from.name) : ctx;
          const srcs = toks.flatMap((t) => { const hits = globExpand(base, t); if (!hits.length) throw new Error(`${where}: COPY source ${t} not found${from ? ` in stage ${from.name}` : ' in the build context'}`); return hits; });
          const destAbs = path.posix.resolve(workdir, dest);
          const asDir = dest.endsWith('/') || srcs.length > 1;
          for (const src of srcs) {
            const sAbs = path.join(base, src);
            if (fs.statSync(sAbs).isDirectory()) { fs.mkdirSync(host(s, destAbs), { recursive: true }); sh(['cp', '-a', `${sAbs}/.`, `${host(s, destAbs)}/`]); }
            else {
              const target = asDir || (fs.existsSync(host(s, destAbs)) && fs.statSync(host(s, destAbs)).isDirectory()) ? path.posix.join(destAbs, path.basename(src)) : destAbs;
              fs.mkdirSync(path.dirname(host(s, target)), { recursive: true });
              sh(['cp', '-a', sAbs, host(s, target)]);
            }
          }
          info(`${where}: COPY ${f.from ? `--from=${f.from[0]} ` : ''}${toks.join(' ')} -> ${destAbs}`);
          break;
        }
        case 'RUN': {
          const { rest } = flags(ins.args + ' '); // drops --mount=type=cache,... and friends
          const parts = rest.split('&&').map((x) => x.trim());
          const unsafe = parts.filter((p) => !/^npm\s+[a-z][a-z-]*(\s+[^;|&`$<>]*)?$/.test(p));
          if (unsafe.length) throw new Error(`${where}: RUN replays only plain npm commands joined by &&; cannot replay: ${unsafe.join(' | ')}`);
          const log = path.join(WORK, 'logs', `${s.name}-line${ins.line}.log`);
          const fd = fs.openSync(log, 'w');
          const t1 = Date.now();
          const r = cp.spawnSync('/bin/sh', ['-c', rest], {
            cwd: host(s, workdir), stdio: ['ignore', fd, fd],
            // The image's npm (CHECK_NPM_BIN) comes first; HOME stays the host's so npm's cache, registry and CA settings apply.
            env: { PATH: `${process.env.CHECK_NPM_BIN ? process.env.CHECK_NPM_BIN + ':' : ''}${process.env.PATH}`, HOME: process.env.HOME, npm_config_update_notifier: 'false', ...env },
          });
          fs.closeSync(fd);
          if (r.status !== 0) {
            console.log(fs.readFileSync(log, 'utf8').split('\n').slice(-40).join('\n'));
            throw new Error(`${where}: RUN ${rest} exited ${r.status ?? r.signal}`);
          }
          info(`${where}: RUN ${rest} (${((Date.now() - t1) / 1000).toFixed(1)} s)`);
          break;
        }
        default: throw new Error(`${where}: ${ins.instr} is not supported by the replay`);
      }
    }
    byName.set(s.name, s);
    ok(`stage ${s.name} replayed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    summary = { stage: s.name, dir: host(s, workdir), workdir, env, user, cmd, healthcheck, expose };
  }
  writeJson(path.join(WORK, 'runtime.json'), summary);
  done();
}

// ---------------------------------------------------------------- runtime ----------------------------------------
function freePort() {
  return new Promise((res, rej) => { const s = net.createServer(); s.on('error', rej); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });
}

async function cmdRuntime() {
  const rt = readJson(path.join(WORK, 'runtime.json'));
  // Without a YAML parser (a) could not extract the compose settings: fall back to obvious test values.
  const compose = readJson(path.join(WORK, 'compose.json')) ?? {
    stopGraceS: 15, readOnly: false,
    appEnv: { JWT_SECRET: 'check-containers-jwt-secret-0123456789abcdef', MERCHANT_SECRETS: 'm_check:check-merchant-secret-0123', SERVICE_TOKENS: 'check:check-service-token-0123', ADMIN_API_KEYS: 'check:check-admin-key-0123456' },
  };
  const redisPort = Number(process.env.CHECK_REDIS_PORT);
  const dir = rt.dir;

  // What the runtime stage contains.
  const entries = fs.readdirSync(dir).sort();
  check(JSON.stringify(entries) === JSON.stringify(['dist', 'lua', 'node_modules', 'package.json']), `runtime ${rt.workdir} holds only dist, lua, node_modules, package.json`, `got ${entries.join(', ')}`);
  check(fs.existsSync(path.join(dir, 'dist/main.js')), 'dist/main.js built');
  const luaCount = cp.spawnSync('find', [path.join(dir, 'lua'), '-name', '*.lua'], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).length;
  check(luaCount > 0, `lua scripts present (${luaCount})`);
  const pkg = readJson(path.join(dir, 'package.json'));
  const devPresent = Object.keys(pkg.devDependencies ?? {}).filter((d) => fs.existsSync(path.join(dir, 'node_modules', d)));
  check(devPresent.length === 0, 'no devDependencies in runtime node_modules', devPresent.join(', '));
  const du = cp.spawnSync('du', ['-sh', path.join(dir, 'node_modules')], { encoding: 'utf8' }).stdout.split('\t')[0];
  info(`runtime node_modules: ${du}`);

  // Run as the image user. The node image's `node` user is uid/gid 1000.
  const ids = rt.user === 'node' ? [1000, 1000] : /^\d+(:\d+)?$/.test(rt.user) ? rt.user.split(':').map(Number) : null;
  const canDrop = process.getuid() === 0 && ids && cp.spawnSync('sh', ['-c', 'command -v setpriv'], {}).status === 0;
  const home = path.join(WORK, 'home');
  fs.mkdirSync(home, { recursive: true });
  if (canDrop) fs.chownSync(home, ids[0], ids[1] ?? ids[0]);
  const wrap = (argv) => (canDrop ? ['setpriv', `--reuid=${ids[0]}`, `--regid=${ids[1] ?? ids[0]}`, '--clear-groups', ...argv] : argv);
  info(canDrop ? `processes run as uid ${ids[0]} (USER ${rt.user}) via setpriv` : `cannot switch to USER ${rt.user} here; running as the current user`);
  if (canDrop) {
    const probe = wrap(['sh', '-c', `touch '${dir}/.probe' 2>/dev/null`]);
    const w = cp.spawnSync(probe[0], probe.slice(1));
    check(w.status !== 0, `USER ${rt.user} cannot write to ${rt.workdir} (app code is root-owned)`);
    fs.rmSync(path.join(dir, '.probe'), { force: true });
  }
  const baseEnv = { PATH: `${path.dirname(process.execPath)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`, HOME: home, ...rt.env };
  const pidsFile = path.join(WORK, 'pids');
  const children = new Set();
  process.on('exit', () => { for (const c of children) try { c.kill('SIGKILL'); } catch {} });

  const start = (label, env) => {
    const log = path.join(WORK, 'logs', `app-${label}.log`);
    const fd = fs.openSync(log, 'w');
    const argv = wrap(rt.cmd);
    const c = cp.spawn(argv[0], argv.slice(1), { cwd: dir, env, stdio: ['ignore', fd, fd] });
    fs.closeSync(fd);
    fs.appendFileSync(pidsFile, `${c.pid}\n`);
    children.add(c);
    c.exited = new Promise((r) => c.once('exit', (code, signal) => { children.delete(c); r({ code, signal }); }));
    c.log = () => fs.readFileSync(log, 'utf8');
    return c;
  };
  const running = (c) => c.exitCode === null && c.signalCode === null;
  const within = (p, ms) => Promise.race([p, sleep(ms).then(() => null)]);
  const healthcheck = (env) => {
    const argv = wrap(rt.healthcheck.argv);
    const t = Date.now();
    const r = cp.spawnSync(argv[0], argv.slice(1), { cwd: dir, env, encoding: 'utf8', timeout: rt.healthcheck.timeoutS * 1000 });
    return { status: r.status, ms: Date.now() - t };
  };
  const get = async (port, p) => { try { const r = await fetch(`http://127.0.0.1:${port}${p}`, { signal: AbortSignal.timeout(3000) }); return { status: r.status, body: await r.text() }; } catch (e) { return { status: 0, body: String(e.cause?.code ?? e.message) }; } };
  const tail = (c) => c.log().trim().split('\n').slice(-8).map((l) => `          ${l.slice(0, 300)}`).join('\n');

  // 1) `docker run` with no settings, then with secrets but no Redis: refuse, exit non-zero, name REDIS_URL.
  const secrets = Object.fromEntries(Object.entries(compose.appEnv).filter(([k]) => !/^REDIS_/.test(k)));
  for (const [label, extra] of [['bare', {}], ['no-redis', secrets]]) {
    const c = start(`config-${label}`, { ...baseEnv, ...extra, PORT: String(await freePort()) });
    const r = await within(c.exited, 20_000);
    const out = c.log();
    check(r && r.code !== 0 && r.code !== null, `NODE_ENV=production ${label === 'bare' ? 'with no settings at all' : 'with secrets but no Redis settings'} exits non-zero (${r ? `exit ${r.code}` : 'still running after 20 s'})`);
    check(/REDIS_URL/.test(out), 'and its message names REDIS_URL', out.trim().slice(0, 200));
    if (r) info(`message: ${out.trim().split('\n').pop().slice(0, 200)}`);
  }

  // 2) HEALTHCHECK fails when nothing listens.
  {
    const port = await freePort();
    const r = healthcheck({ ...baseEnv, PORT: String(port) });
    check(r.status !== 0, `HEALTHCHECK fails when nothing listens on $PORT (exit ${r.status})`);
  }

  // 3) Redis unreachable: live 200, ready 503, HEALTHCHECK unhealthy.
  {
    const port = await freePort(); const dead = await freePort();
    const env = { ...baseEnv, ...compose.appEnv, REDIS_URL: `redis://127.0.0.1:${dead}`, PORT: String(port) };
    const c = start('redis-down', env);
    let live = { status: 0 };
    for (let i = 0; i < 60 && live.status !== 200 && running(c); i++) { await sleep(250); live = await get(port, '/health/live'); }
    check(live.status === 200, 'Redis unreachable: /health/live answers 200', live.body);
    const ready = await get(port, '/health/ready');
    check(ready.status === 503, `Redis unreachable: /health/ready answers 503 ${ready.body}`);
    const hc = healthcheck(env);
    check(hc.status !== 0, `Redis unreachable: HEALTHCHECK reports unhealthy (exit ${hc.status})`);
    c.kill('SIGKILL'); await c.exited;
  }

  // 4) The real thing: compose's app environment against the local Redis.
  {
    const port = await freePort();
    const env = { ...baseEnv, ...compose.appEnv, REDIS_URL: `redis://127.0.0.1:${redisPort}`, PORT: String(port) };
    const t0 = Date.now();
    const c = start('ready', env);
    let ready = { status: 0, body: '' };
    while (Date.now() - t0 < 20_000 && running(c)) {
      ready = await get(port, '/health/ready');
      if (ready.status === 200) break;
      await sleep(200);
    }
    const secs = ((Date.now() - t0) / 1000).toFixed(1);
    check(ready.status === 200, `/health/ready answered 200 after ${secs} s (limit 20 s): ${ready.body}`, !running(c) ? `app exited ${c.exitCode ?? c.signalCode}\n${tail(c)}` : `last ${ready.status} ${ready.body}\n${tail(c)}`);
    const live = await get(port, '/health/live');
    check(live.status === 200, '/health/live answers 200');
    const hc = healthcheck(env);
    check(hc.status === 0, `the image's HEALTHCHECK command passes (${hc.ms} ms, timeout ${rt.healthcheck.timeoutS} s)`);
    const t1 = Date.now();
    c.kill('SIGTERM');
    const r = await within(c.exited, compose.stopGraceS * 1000);
    check(r && r.code === 0, `SIGTERM drains and exits 0 in ${((Date.now() - t1) / 1000).toFixed(2)} s (stop_grace_period ${compose.stopGraceS} s)`, r ? `exit ${r.code ?? r.signal}\n${tail(c)}` : 'still running');
    const errs = c.log().split('\n').filter((l) => /EACCES|EROFS|"level":(50|60)/.test(l));
    check(errs.length === 0, 'no permission errors or error-level logs during the run', errs.slice(0, 3).join('\n'));
    check(JSON.stringify(fs.readdirSync(dir).sort()) === JSON.stringify(entries), `nothing was written into ${rt.workdir} (compose read_only: ${compose.readOnly})`);
  }
  done();
}

const sub = process.argv[2];
const fns = { compose: cmdCompose, lint: cmdLint, context: cmdContext, replay: cmdReplay, runtime: cmdRuntime };
if (!fns[sub]) { console.error(`unknown subcommand ${sub}`); process.exit(2); }
Promise.resolve().then(fns[sub]).catch((e) => { console.log(`  FAIL  ${e.message}`); process.exit(1); });
JS

export CHECK_ROOT="$ROOT" CHECK_WORK="$WORK"
run() { node "$WORK/check.cjs" "$@"; }

# ---------------------------------------------------------------------------------------------------------------
section "(a) docker-compose.yml"
run compose

section "(b) Dockerfile lint"
if command -v hadolint >/dev/null 2>&1; then
  hadolint Dockerfile && echo "  ok    hadolint" || die "hadolint reported problems"
else
  echo "  ..    hadolint not installed (not packaged in Debian 12 apt; its npm wrapper downloads a binary from GitHub): structural lint only"
fi
run lint

if [ "$MODE" = --static ]; then
  section "done (static checks only) in $((SECONDS - STARTED_AT)) s"
  exit 0
fi

section "(c) replay the image build without docker"
command -v redis-server >/dev/null || die "redis-server is required for the runtime check (apt-get install redis-server)"
command -v npm >/dev/null || die "npm is required"
run context
# RUN lines must use the npm that ships in the base image, not the host's: npm versions differ in how strictly
# `npm ci` checks package-lock.json. node:20 images bundle npm 10.8.2 (override with CHECK_IMAGE_NPM).
IMAGE_NPM="${CHECK_IMAGE_NPM:-10.8.2}"
if [ "$(npm --version)" = "$IMAGE_NPM" ]; then
  export CHECK_NPM_BIN=""
else
  npm install --global --prefix "$WORK/npm" "npm@$IMAGE_NPM" --no-audit --no-fund --loglevel=error >"$WORK/logs/npm-install.log" 2>&1 \
    || { cat "$WORK/logs/npm-install.log" >&2; die "could not fetch npm@$IMAGE_NPM for the replay"; }
  export CHECK_NPM_BIN="$WORK/npm/bin"
fi
echo "  ..    RUN lines use npm $("${CHECK_NPM_BIN:+$CHECK_NPM_BIN/}npm" --version) (as in the image; host npm is $(npm --version))"
run replay

section "(c) run the runtime stage"
REDIS_PORT="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
mkdir -p "$WORK/redis"
# The compose file's redis command, plus local-only overrides (port, loopback, temp data dir).
mapfile -t REDIS_CMD < <(node -e 'const c=require(process.argv[1]); for (const a of (c && c.redisCommand) || ["redis-server"]) console.log(a)' "$WORK/compose.json")
REDIS_CMD[0]="$(command -v redis-server)"
"${REDIS_CMD[@]}" --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$WORK/redis" --daemonize no --logfile "$WORK/logs/redis.log" &
REDIS_PID=$!
for _ in $(seq 1 100); do
  [ "$(redis-cli -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ] && break
  kill -0 "$REDIS_PID" 2>/dev/null || { cat "$WORK/logs/redis.log" >&2; die "redis-server (compose command) did not start"; }
  sleep 0.1
done
[ "$(redis-cli -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ] || die "redis-server did not answer PING"
echo "  ok    redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on 127.0.0.1:$REDIS_PORT with the compose command: ${REDIS_CMD[*]:1}"
[ "$(redis-cli -p "$REDIS_PORT" config get appendonly | tail -n1)" = yes ] || die "appendonly is not yes"
[ "$(redis-cli -p "$REDIS_PORT" config get maxmemory-policy | tail -n1)" = noeviction ] || die "maxmemory-policy is not noeviction"
echo "  ok    redis reports appendonly=yes, maxmemory-policy=noeviction, maxmemory=$(redis-cli -p "$REDIS_PORT" config get maxmemory | tail -n1)"
CHECK_REDIS_PORT="$REDIS_PORT" run runtime

section "all container checks passed in $((SECONDS - STARTED_AT)) s"
