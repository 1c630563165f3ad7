/**
 * The failover part of `bench/durability.ts`: the real service against Sentinel (master + replica), money-moving
 * writes (signed merchant order creation) at a steady rate, then the replica stalls (SIGSTOP) with its link broken
 * (`CLIENT KILL TYPE replica`: SIGSTOP alone loses nothing), `kill -9` of the master, Sentinel promotes the replica,
 * the writes go on until the service answers again. Then every acknowledged (2xx) order is looked up on the new
 * master by retrying it with its merchantOrderNo: 200 is the original, 201 means it was lost and made again.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { randomPrefix } from '../../test/harness/redis-server';
import { waitUntil, withConnection } from '../../test/harness/redis-process';
import { startRedisSentinel } from '../../test/harness/redis-sentinel';
import { freePort } from '../../test/harness/free-port';
import { onCleanup } from './cleanup';
import { fullEnv, spawnFullStack } from './full-stack';
import { waitUntilServing } from './proc';

export interface SignedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
}

export interface FailoverOptions {
  replicas: string;
  dist: string;
  workDir: string;
  /** A signed POST /merchant/orders for `merchantOrderNo` (fresh timestamp and nonce each call). */
  order: (merchantOrderNo: string) => SignedRequest;
  /** Requests in flight. */
  inFlight: number;
  /** Requests started per second, over all in flight. */
  rate: number;
}

export interface FailoverResult {
  replicas: string;
  /** Orders answered 2xx, from the first write to the end of the run. */
  acknowledged: number;
  /** Acknowledged before the stall began. */
  acknowledgedBefore: number;
  /** Acknowledged while the replica was stalled, before the kill. */
  acknowledgedDuringStall: number;
  /** Acknowledged orders the new master lacks. */
  lost: number;
  /** Acknowledged orders whose lookup answered neither 200 nor 201. */
  unknown: number;
  writeUnconfirmed: number;
  /** Other non-2xx answers and failed requests (status 0), by `status error`. */
  otherFailures: Record<string, number>;
  /** From the kill to the first 2xx after it. */
  outageS: number;
  /** From the kill until every Sentinel reported the new master. */
  promotionS: number;
}

interface Answer {
  status: number;
  error?: string;
}

async function send(base: string, r: SignedRequest): Promise<Answer> {
  try {
    const res = await fetch(`${base}${r.path}`, { method: r.method, headers: r.headers, body: r.body, signal: AbortSignal.timeout(5000) });
    const text = await res.text();
    let error: string | undefined;
    try {
      error = (JSON.parse(text) as { error?: string }).error;
    } catch {
      error = undefined;
    }
    return { status: res.status, error };
  } catch {
    return { status: 0 };
  }
}

/** SIGCONT, if the process still exists. */
function continueProcess(pid: number): void {
  try {
    process.kill(pid, 'SIGCONT');
  } catch {
    // Gone already.
  }
}

export async function runFailover(o: FailoverOptions): Promise<FailoverResult> {
  const s = await startRedisSentinel();
  const unregister = onCleanup(
    `redis sentinel (failover, DURABILITY_REPLICAS=${o.replicas})`,
    () => s.destroy(),
    () => void s.destroy(),
  );
  let proc: Awaited<ReturnType<typeof spawnFullStack>> | undefined;
  const replicaPid = s.replica.pid!;
  try {
    // The first WAIT after a replica's full sync can take up to its once-a-second ACK: have it behind us.
    await withConnection(s.master, async (c) => (await c.set('warm-up', '1'), c.wait(1, 5000)));
    const port = await freePort();
    const env = fullEnv(port, '', randomPrefix(), {
      REDIS_URL: '',
      REDIS_SENTINELS: s.envValue,
      REDIS_SENTINEL_MASTER: s.masterName,
      REDIS_COMMAND_TIMEOUT_MS: '1000',
      DURABILITY_REPLICAS: o.replicas,
      DURABILITY_TIMEOUT_MS: '300',
      LOG_LEVEL: 'warn',
      RATE_LIMIT_MERCHANT: '10000000',
    });
    proc = spawnFullStack({ id: `durability-failover-${o.replicas}`, port, dist: o.dist, env, workDir: o.workDir });
    const base = `http://127.0.0.1:${port}`;
    await waitUntilServing(proc, port, `${base}/health/ready`, 60_000);

    type Phase = 'before' | 'stall' | 'after';
    let phase: Phase = 'before';
    const acked: { no: string; phase: Phase }[] = [];
    let writeUnconfirmed = 0;
    const otherFailures: Record<string, number> = {};
    let killedAt = 0;
    let firstOkAfterKill = 0;
    let stop = false;
    let seq = 0;
    const prefix = `fo${o.replicas}-${process.pid}-${Date.now()}`;
    const intervalMs = (1000 * o.inFlight) / o.rate;
    const worker = async () => {
      while (!stop) {
        const started = Date.now();
        const startPhase = phase;
        const no = `${prefix}-${++seq}`;
        const a = await send(base, o.order(no));
        if (a.status >= 200 && a.status < 300) {
          acked.push({ no, phase: startPhase });
          if (killedAt && started >= killedAt && !firstOkAfterKill) firstOkAfterKill = Date.now();
        } else if (a.status === 503 && a.error === 'WRITE_UNCONFIRMED') writeUnconfirmed++;
        else {
          const what = `${a.status}${a.error ? ` ${a.error}` : ''}`;
          otherFailures[what] = (otherFailures[what] ?? 0) + 1;
        }
        const rest = intervalMs - (Date.now() - started);
        if (rest > 0) await sleep(rest);
      }
    };
    const workers = Promise.all(Array.from({ length: o.inFlight }, worker));
    let promotionS = NaN;
    try {
      await sleep(1500);
      process.kill(replicaPid, 'SIGSTOP');
      try {
        await withConnection(s.master, (c) => c.call('CLIENT', 'KILL', 'TYPE', 'replica'));
        phase = 'stall';
        await sleep(1000);
        killedAt = Date.now();
        const promoted = s.killMaster();
        phase = 'after';
        process.kill(replicaPid, 'SIGCONT');
        await promoted;
        promotionS = (Date.now() - killedAt) / 1000;
      } finally {
        continueProcess(replicaPid);
      }
      // The old master comes back; Sentinel makes it a replica of the new one (with 1, writes need a replica again).
      await s.replica.start();
      await waitUntil('a write acknowledged after the kill', async () => firstOkAfterKill > 0 || 'not yet', 30_000, 50);
      await sleep(1000);
    } finally {
      stop = true;
      await workers;
    }

    // Each acknowledged order, retried with its merchantOrderNo on the new master: 200 found, 201 lost (made again).
    let lost = 0;
    let unknown = 0;
    let next = 0;
    const check = async () => {
      while (next < acked.length) {
        const { no } = acked[next++];
        let a: Answer = { status: 0 };
        for (let attempt = 0; attempt < 5; attempt++) {
          a = await send(base, o.order(no));
          if (a.status === 200 || a.status === 201) break;
          await sleep(200);
        }
        if (a.status === 201) lost++;
        else if (a.status !== 200) unknown++;
      }
    };
    await Promise.all(Array.from({ length: 20 }, check));
    return {
      replicas: o.replicas,
      acknowledged: acked.length,
      acknowledgedBefore: acked.filter((x) => x.phase === 'before').length,
      acknowledgedDuringStall: acked.filter((x) => x.phase === 'stall').length,
      lost,
      unknown,
      writeUnconfirmed,
      otherFailures,
      outageS: (firstOkAfterKill - killedAt) / 1000,
      promotionS,
    };
  } finally {
    continueProcess(replicaPid);
    await proc?.stop();
    await s.destroy();
    unregister();
  }
}
