import { Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';
import type Redis from 'ioredis';
import { loadConfig } from '../../src/platform/config/load-config';
import { visitsKey } from '../../src/platform/diagnostics/diagnostics.keys';
import { MetricsService } from '../../src/platform/metrics/metrics.service';
import { rateLimitKey } from '../../src/platform/rate-limit/rate-limit.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisService } from '../../src/platform/redis/redis.service';
import { DEFAULT_LUA_DIR, loadAllScripts, ScriptContractError } from '../../src/platform/scripts/script-loader';
import { ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { rawConnection } from '../harness/redis-process';
import { randomPrefix } from '../harness/redis-server';

Logger.overrideLogger(['error']);

/** Every script file under lua/, found by walking the folder ourselves (not through the loader). */
function scriptFiles(dir = DEFAULT_LUA_DIR): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) return name === 'includes' ? [] : scriptFiles(p);
      return name.endsWith('.lua') ? [relative(DEFAULT_LUA_DIR, p).split(sep).join('/')] : [];
    });
}

describe('Lua script contracts (every file under lua/)', () => {
  const files = scriptFiles();
  const defs = loadAllScripts();

  it('finds scripts, and the loader loads exactly those files', () => {
    expect(files.length).toBeGreaterThan(0);
    expect([...defs.values()].map((d) => d.file).sort()).toEqual(files);
  });

  it.each(files)('%s has a complete contract matching its file name and body', (file) => {
    const def = [...defs.values()].find((d) => d.file === file)!;
    const [, module, name, keyCount] = /^(?:platform|engines|features)\/([a-z][a-z0-9-]*)\/([a-z][a-z0-9-]*)-(\d+)\.lua$/.exec(file)!;
    expect(def.id).toBe(`${module}/${name}`);
    expect(def.numberOfKeys).toBe(Number(keyCount));

    const c = def.contract;
    expect(c.purpose.length).toBeGreaterThanOrEqual(10);
    expect(c.keys).toHaveLength(Number(keyCount));
    c.keys.forEach((k) => expect(k.trim().length).toBeGreaterThan(3));
    expect(c.returns.length).toBeGreaterThan(3);

    // Every KEYS[i] / ARGV[i] the body uses is documented (checked here independently of the loader).
    const text = readFileSync(join(DEFAULT_LUA_DIR, file), 'utf8');
    const header = /^--\[\[\n[\s\S]*?\n\]\]/.exec(text)![0];
    const body = text.slice(header.length);
    const used = (kind: string) => Math.max(0, ...[...body.matchAll(new RegExp(`\\b${kind}\\[(\\d+)\\]`, 'g'))].map((m) => Number(m[1])));
    expect(used('KEYS')).toBeLessThanOrEqual(c.keys.length);
    expect(used('ARGV')).toBeLessThanOrEqual(c.argv.length);
    if (c.argv.length === 0) expect(header).toMatch(/^\s*ARGV\s+none\s*$/m);
    else c.argv.forEach((a) => expect(a.trim().length).toBeGreaterThan(3));

    // Includes are inlined and the sha is of what is sent to Redis.
    expect(def.source).not.toMatch(/^--- @include/m);
    expect(def.sha).toBe(createHash('sha1').update(def.source).digest('hex'));
  });
});

describe('script loader rejects bad files', () => {
  const GOOD_HEADER = [
    '--[[',
    '  Increments a counter for the test suite and returns it.',
    '',
    '  KEYS[1]  the counter',
    '  ARGV[1]  the increment',
    '',
    '  Returns: the new value',
    ']]',
  ].join('\n');
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  /** A temporary lua dir holding the given files (relative path → content). */
  function luaDir(files: Record<string, string>): string {
    const dir = mkdtempSync(join(tmpdir(), 'rp-lua-'));
    dirs.push(dir);
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, rel)), { recursive: true });
      writeFileSync(join(dir, rel), text);
    }
    return dir;
  }

  const expectRejects = (files: Record<string, string>, message: RegExp) => {
    const dir = luaDir(files);
    let caught: unknown;
    try {
      loadAllScripts(dir);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ScriptContractError);
    expect((caught as Error).message).toMatch(message);
  };

  it('accepts a well-formed script with an include (control case)', () => {
    const dir = luaDir({
      'platform/includes/helper.lua': 'local function one() return 1 end',
      'features/t/counter-1.lua': `${GOOD_HEADER}\n--- @include "platform/includes/helper"\nreturn redis.call('INCRBY', KEYS[1], ARGV[1]) + one() - 1\n`,
    });
    const defs = loadAllScripts(dir);
    expect([...defs.keys()]).toEqual(['t/counter']);
    const def = defs.get('t/counter')!;
    expect(def.numberOfKeys).toBe(1);
    expect(def.contract.keys).toEqual(['the counter']);
    expect(def.contract.argv).toEqual(['the increment']);
    expect(def.contract.returns).toBe('the new value');
    expect(def.source).toContain('local function one() return 1 end');
  });

  it('a file without the --[[ ]] contract block', () => {
    expectRejects(
      { 'features/t/counter-1.lua': "return redis.call('INCR', KEYS[1])\n" },
      /t\/counter-1\.lua: must open with a --\[\[ \.\.\. \]\] contract block/,
    );
  });

  it('a block that does not start with the purpose', () => {
    expectRejects(
      { 'features/t/counter-1.lua': GOOD_HEADER.replace('  Increments a counter for the test suite and returns it.\n', '') + '\nreturn 1\n' },
      /contract must start with the purpose/,
    );
  });

  it('a key count in the file name that differs from the documented KEYS', () => {
    expectRejects(
      { 'features/t/counter-2.lua': `${GOOD_HEADER}\nreturn redis.call('INCR', KEYS[1])\n` },
      /t\/counter-2\.lua: file name says 2 keys but the contract documents 1/,
    );
  });

  it('KEYS documented out of order', () => {
    expectRejects({ 'features/t/counter-1.lua': GOOD_HEADER.replace('KEYS[1]', 'KEYS[2]') + '\nreturn 1\n' }, /KEYS\[2\] is out of order/);
  });

  it('ARGV neither listed nor declared "none"', () => {
    expectRejects(
      { 'features/t/counter-1.lua': GOOD_HEADER.replace('  ARGV[1]  the increment\n', '') + "\nreturn redis.call('INCR', KEYS[1])\n" },
      /must list each ARGV\[i\], or say "ARGV {2}none"/,
    );
  });

  it('an ARGV used in the body but not documented', () => {
    expectRejects(
      { 'features/t/counter-1.lua': `${GOOD_HEADER}\nreturn redis.call('INCRBY', KEYS[1], ARGV[1] + ARGV[2])\n` },
      /t\/counter-1\.lua: uses ARGV\[2\] but the contract documents 1/,
    );
  });

  it('a KEYS used in the body but not documented', () => {
    expectRejects(
      { 'features/t/counter-1.lua': `${GOOD_HEADER}\nreturn redis.call('COPY', KEYS[1], KEYS[2])\n` },
      /uses KEYS\[2\] but the contract documents 1/,
    );
  });

  it('no Returns:', () => {
    expectRejects(
      { 'features/t/counter-1.lua': GOOD_HEADER.replace('  Returns: the new value\n', '') + '\nreturn 1\n' },
      /t\/counter-1\.lua: contract must say what the script Returns:/,
    );
  });

  it('an include that does not exist', () => {
    expectRejects(
      { 'features/t/counter-1.lua': `${GOOD_HEADER}\n--- @include "platform/includes/nope"\nreturn 1\n` },
      /t\/counter-1\.lua: includes "platform\/includes\/nope" but platform\/includes\/nope\.lua does not exist/,
    );
  });

  it('a file name without the key count, or outside lua/<layer>/<module>/', () => {
    const layout = /scripts live at lua\/<platform\|engines\|features>\/<module>\/<name>-<numberOfKeys>\.lua/;
    expectRejects({ 'features/t/counter.lua': `${GOOD_HEADER}\nreturn 1\n` }, layout);
    expectRejects({ 'counter-1.lua': `${GOOD_HEADER}\nreturn 1\n` }, layout);
    expectRejects({ 't/counter-1.lua': `${GOOD_HEADER}\nreturn 1\n` }, layout);
    expectRejects({ 'plugins/t/counter-1.lua': `${GOOD_HEADER}\nreturn 1\n` }, layout);
  });

  it('two files with the same script id', () => {
    expectRejects(
      {
        'features/t/counter-1.lua': `${GOOD_HEADER}\nreturn 1\n`,
        'features/t/counter-2.lua': GOOD_HEADER.replace('  ARGV[1]', '  KEYS[2]  another counter\n  ARGV[1]') + '\nreturn 1\n',
      },
      /duplicates script id t\/counter/,
    );
  });
});

describe('ScriptRegistry on a 3-master cluster', () => {
  let cluster: RedisClusterHandle;
  let redis: RedisService;
  let scripts: ScriptRegistry;
  let keys: KeyBuilder;
  let raw: Redis[];
  /** slot → index of the owning master in cluster.nodes */
  let ownerOfSlot: (slot: number) => number;
  let metrics: MetricsService;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
    raw = cluster.nodes.map((n) => rawConnection(n));
    const config = loadConfig({
      NODE_ENV: 'test',
      REDIS_CLUSTER_NODES: cluster.envValue,
      REDIS_KEY_PREFIX: randomPrefix(),
      REDIS_COMMAND_TIMEOUT_MS: '1000',
    });
    keys = new KeyBuilder(config);
    metrics = new MetricsService();
    redis = new RedisService(config, metrics);
    scripts = new ScriptRegistry(redis);
    await scripts.onApplicationBootstrap();

    const slots = await raw[0].cluster('SLOTS');
    ownerOfSlot = (slot) => {
      const range = slots.find(([start, end]) => slot >= start && slot <= end)!;
      return cluster.nodes.findIndex((n) => n.port === range[2][1]);
    };
  });

  afterAll(async () => {
    scripts?.onApplicationShutdown();
    await redis?.close();
    raw?.forEach((r) => r.disconnect());
    await cluster?.destroy();
  });

  const shas = () => scripts.list().map((d) => d.sha);
  const redisErrors = async () => (await metrics.redisErrors.get()).values.reduce((sum, v) => sum + v.value, 0);
  const scriptExists = (r: Redis) => r.script('EXISTS', ...shas()) as Promise<number[]>;

  it('boots: every script is loaded on every master', async () => {
    expect(scripts.isLoaded).toBe(true);
    expect(redis.isCluster).toBe(true);
    expect(redis.masters()).toHaveLength(3);
    expect(
      scripts
        .list()
        .map((d) => d.id)
        .sort(),
    ).toEqual([...loadAllScripts().keys()].sort());
    for (const r of raw) expect(await scriptExists(r)).toEqual(shas().map(() => 1));
  });

  /** The keys the service builds for `tag` (an account's visit counter, a user's rate-limit window) and the masters that own them. */
  async function placement(tag: string) {
    const visits = visitsKey(keys, tag, 'x');
    const window = rateLimitKey(keys, { kind: 'user', id: tag });
    const slot = Number(await raw[0].cluster('KEYSLOT', visits));
    const windowSlot = Number(await raw[0].cluster('KEYSLOT', window));
    return { tag, visits, window, slot, windowSlot, owner: ownerOfSlot(slot), windowOwner: ownerOfSlot(windowSlot) };
  }

  /** Picks tags (by asking the cluster for their keys' slots) until every master owns both keys of at least two of them. */
  async function placedOnEveryMaster(round: string) {
    const perOwner = new Map<number, Array<Awaited<ReturnType<typeof placement>>>>();
    for (let i = 0; i < 300 && [0, 1, 2].some((o) => (perOwner.get(o)?.length ?? 0) < 2); i++) {
      const p = await placement(`${round}${i}`);
      if (p.owner === p.windowOwner && (perOwner.get(p.owner)?.length ?? 0) < 2) perOwner.set(p.owner, [...(perOwner.get(p.owner) ?? []), p]);
    }
    return [...perOwner.values()].flat();
  }

  async function exerciseOnEveryMaster(round: string) {
    const placed = await placedOnEveryMaster(round);
    // The keys the service builds for these tags really spread over all three masters.
    expect(placed).toHaveLength(6);
    expect(new Set(placed.map((p) => p.owner))).toEqual(new Set([0, 1, 2]));
    expect(new Set(placed.map((p) => p.windowOwner))).toEqual(new Set([0, 1, 2]));

    for (const p of placed) {
      const [n1, t1] = await scripts.run<[number, number]>('diagnostics/touch', [p.visits], [60_000]);
      const [n2, t2] = await scripts.run<[number, number]>('diagnostics/touch', [p.visits], [60_000]);
      expect([n1, n2]).toEqual([1, 2]);
      expect(Math.abs(t1 - Date.now())).toBeLessThan(5_000);
      expect(t2).toBeGreaterThanOrEqual(t1);

      // Limit 3 per 10 s, leases of 2: the first gets 2, the second the 1 left, the third nothing.
      const lease = () => scripts.run<[number, number, number]>('core/rate-limit', [p.window], [3, 10_000, 2]);
      const r1 = await lease();
      const r2 = await lease();
      const r3 = await lease();
      expect(r1).toEqual([2, 1, 10_000]);
      expect(r2.slice(0, 2)).toEqual([1, 0]);
      expect(r3.slice(0, 2)).toEqual([0, 0]);
      expect(r3[2]).toBeGreaterThan(0);
      expect(r3[2]).toBeLessThanOrEqual(10_000);

      // The data physically lives on the master that owns the slot; the others redirect.
      const owner = raw[p.owner];
      expect(await owner.hget(p.visits, 'n')).toBe('2');
      expect(await owner.get(p.window)).toBe('3');
      expect(await owner.pttl(p.visits)).toBeGreaterThan(50_000);
      const other = raw[(p.owner + 1) % 3];
      await expect(other.hget(p.visits, 'n')).rejects.toThrow(/^MOVED \d+ 127\.0\.0\.1:\d+/);
    }
    return placed;
  }

  it('runs diagnostics/touch and core/rate-limit with keys on all three masters', async () => {
    const placed = await exerciseOnEveryMaster('a');
    // Each master received script calls.
    for (const idx of [0, 1, 2]) {
      const stats = await raw[idx].info('commandstats');
      const calls = [...stats.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)].reduce((s, m) => s + Number(m[1]), 0);
      expect(calls).toBeGreaterThanOrEqual(placed.filter((p) => p.owner === idx).length * 2);
    }
  });

  it('recovers from NOSCRIPT after SCRIPT FLUSH on every node', async () => {
    await exerciseOnEveryMaster('b');
    const noscriptBefore = await Promise.all(raw.map(noscriptErrors));
    const errorsBefore = await redisErrors();

    await Promise.all(raw.map((r) => r.script('FLUSH')));
    for (const r of raw) expect(await scriptExists(r)).toEqual(shas().map(() => 0));

    await exerciseOnEveryMaster('c');

    // Each node answered NOSCRIPT at least once and now has the two exercised scripts cached again.
    const noscriptAfter = await Promise.all(raw.map(noscriptErrors));
    noscriptAfter.forEach((n, i) => expect(n).toBeGreaterThan(noscriptBefore[i]));
    const exercised = ['diagnostics/touch', 'core/rate-limit'].map((id) => scripts.get(id).sha);
    for (const r of raw) expect(await r.script('EXISTS', ...exercised)).toEqual([1, 1]);
    // A NOSCRIPT answered by EVAL is no failure: nothing counted in redis_errors_total.
    expect(await redisErrors()).toBe(errorsBefore);
  });

  it('keeps every key of one tag in one slot', async () => {
    for (const tag of ['same-slot-1', 'same-slot-2', 'same-slot-3']) {
      const p = await placement(tag);
      // The hash tags are `{a:<account>}` and `{user:<account>}`.
      expect(p.slot).toBe(Number(await raw[0].cluster('KEYSLOT', `a:${tag}`)));
      expect(p.windowSlot).toBe(Number(await raw[0].cluster('KEYSLOT', `user:${tag}`)));
      expect(Number(await raw[0].cluster('KEYSLOT', visitsKey(keys, tag, 'other')))).toBe(p.slot);
    }
  });
});

async function noscriptErrors(r: Redis): Promise<number> {
  const info = await r.info('errorstats');
  return Number(/^errorstat_NOSCRIPT:count=(\d+)/m.exec(info)?.[1] ?? 0);
}
