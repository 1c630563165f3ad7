/**
 * What the lock engine's semantics cost inside Redis (`npm run bench -- locks`, section "scripts").
 *
 * One acquire + release of a lock nobody else wants, a new name each time, as the engine's scripts
 * (from the build's lua/) send it, the same scripts with one piece of the fast path taken out, and
 * the two peers' commands. Every variant runs on one connection to the same redis-server, in
 * interleaved batches (the order shuffled every round, so a slow moment of a shared machine is
 * spread over all of them), and the figure is Redis's own execution time for what the client sent,
 * from INFO commandstats: no network, no client. The cut-down variants are not working locks; they
 * only price the piece they leave out.
 */
import type Redis from 'ioredis';
import { join } from 'node:path';
import type { ScriptDefinition } from '../../src/platform/scripts/script-loader';
import { FENCE_KEEP_MS, FENCED_STRING_ACQUIRE_LUA, OWNER_RELEASE_LUA } from './locks-lua';
import { commandTime } from './locks-measure';
import { median } from './measure';

export interface ScriptCostRow {
  id: string;
  label: string;
  /** Redis execution time per acquire + release, µs: median over the rounds. */
  usPerPair: number;
  /** Calls to Redis per acquire + release. */
  commandsPerPair: number;
}

interface Variant {
  id: string;
  label: string;
  /** Top-level commands it sends (INFO commandstats names). */
  commands: readonly string[];
  pair(conn: Redis, i: number): Promise<unknown>;
}

/** Replaces `from` in `text`, or throws (a script changed under the benchmark: update the variant). */
function cut(text: string, from: string, to: string, what: string): string {
  if (!text.includes(from)) throw new Error(`script-cost variant "${what}": the script no longer contains ${JSON.stringify(from)}`);
  return text.replace(from, to);
}

const LEASE = 10_000;
const OWNER = 'abcdef12:0b7c7a86-5c3e-4b39-9f0e-';
/** An owner token of the engine's length (instance:uuid), distinct per pair. */
const token = (i: number) => OWNER + String(i).padStart(12, '0');

async function variants(conn: Redis, dist: string, prefix: string): Promise<Variant[]> {
  const { loadScriptFile } = require(join(dist, 'scripts', 'script-loader')) as typeof import('../../src/platform/scripts/script-loader');
  const luaDir = join(dist, '..', 'lua');
  const file = (id: string): ScriptDefinition => loadScriptFile(luaDir, join(luaDir, `${id}.lua`));
  const acquire = file('locks/acquire-2').source;
  const release = file('locks/release-1').source;
  const load = (lua: string) => conn.script('LOAD', lua) as Promise<string>;
  const engineLike = async (id: string, label: string, acq: string, rel: string): Promise<Variant> => {
    const [a, r] = await Promise.all([load(acq), load(rel)]);
    return {
      id,
      label,
      commands: ['evalsha'],
      pair: async (c, i) => {
        const k = `${prefix}:locks:{s${i}}:`;
        const owner = token(i);
        await c.evalsha(a, 2, `${k}h`, `${k}fence`, owner, 'w', LEASE, 0, FENCE_KEEP_MS, '0');
        await c.evalsha(r, 1, `${k}h`, owner, `${k}released`);
      },
    };
  };
  // The peers' commands, as redlock 5 and redis-semaphore 5 send them for one Redis node.
  const peerAcquire = await load("return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])");
  const peerRelease = await load(OWNER_RELEASE_LUA);
  const noFence = cut(
    acquire,
    'local token = nextFencingToken(fenceKey, fenceKeepMs, nowUs)\n  local exp',
    "local token = string.format('%.0f', nowUs)\n  local exp",
    'no-fence',
  );
  const noFenceNoClock = cut(noFence, 'local nowMs, nowUs = serverTimeMsAndUs()', 'local nowMs, nowUs = 1763000000000, 1763000000000000', 'no-fence-no-clock');
  return [
    await engineLike('engine', 'engine: acquire-2 + release-1 as shipped', acquire, release),
    await engineLike('no-fence', 'engine without the fencing counter (token = Redis clock only)', noFence, release),
    await engineLike('no-fence-no-clock', 'engine without the fencing counter and without TIME (no lease end, no token)', noFenceNoClock, release),
    await (async (): Promise<Variant> => {
      // The least a fenced lock needs (the same text as the uncontended section's reference row, fenced-floor).
      const a = await load(FENCED_STRING_ACQUIRE_LUA);
      return {
        id: 'fenced-string',
        label: 'a string key with the same fencing counter (no reentrancy, no read/write, no watchdog bookkeeping)',
        commands: ['evalsha'],
        pair: async (c, i) => {
          const k = `${prefix}:locks:{s${i}}:`;
          await c.evalsha(a, 2, `${k}fs`, `${k}fence`, token(i), LEASE, FENCE_KEEP_MS);
          await c.evalsha(peerRelease, 1, `${k}fs`, token(i));
        },
      };
    })(),
    {
      id: 'redlock',
      label: 'redlock: SET NX PX in a script; GET + DEL in a script',
      commands: ['evalsha'],
      pair: async (c, i) => {
        const k = `${prefix}:locks:{s${i}}:rl`;
        await c.evalsha(peerAcquire, 1, k, token(i), LEASE);
        await c.evalsha(peerRelease, 1, k, token(i));
      },
    },
    {
      id: 'redis-semaphore',
      label: 'redis-semaphore: SET NX PX; GET + DEL in a script',
      commands: ['set', 'evalsha'],
      pair: async (c, i) => {
        const k = `${prefix}:locks:{s${i}}:rs`;
        await c.set(k, token(i), 'PX', LEASE, 'NX');
        await c.evalsha(peerRelease, 1, k, token(i));
      },
    },
  ];
}

/** Runs every variant `rounds` times, `batch` acquire + release pairs each, interleaved; FLUSHALL between batches. */
export async function measureScriptCost(conn: Redis, dist: string, prefix: string, rounds: number, batch: number): Promise<ScriptCostRow[]> {
  const vs = await variants(conn, dist, prefix);
  const samples = new Map<string, { us: number[]; calls: number[] }>(vs.map((v) => [v.id, { us: [], calls: [] }]));
  let n = 0;
  for (let round = 0; round < rounds; round++) {
    const order = [...vs].sort(() => Math.random() - 0.5);
    for (const v of order) {
      await conn.flushall();
      const before = await commandTime(conn, v.commands);
      for (let i = 0; i < batch; i++) await v.pair(conn, n++);
      const after = await commandTime(conn, v.commands);
      const s = samples.get(v.id)!;
      s.us.push((after.usec - before.usec) / batch);
      s.calls.push((after.calls - before.calls) / batch);
    }
  }
  return vs.map((v) => {
    const s = samples.get(v.id)!;
    return { id: v.id, label: v.label, usPerPair: median(s.us) ?? NaN, commandsPerPair: median(s.calls) ?? NaN };
  });
}
