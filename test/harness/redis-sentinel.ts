import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type Redis from 'ioredis';
import { dataNodeArgs, HostPort, RedisProcess, freePorts, makeTempDir, removeDir, waitUntil, withConnection } from './redis-process';

export interface RedisSentinelHandle {
  sentinels: HostPort[];
  /** Value for REDIS_SENTINELS: `127.0.0.1:p1[,127.0.0.1:p2...]`. */
  envValue: string;
  /** Value for REDIS_SENTINEL_MASTER. */
  masterName: string;
  /** The node the Sentinels consider master. After `failover()` this is the former replica. */
  master: RedisProcess;
  /** The node replicating from `master`. After `failover()` this is the former master (it is turned into a replica by Sentinel some seconds later). */
  replica: RedisProcess;
  /**
   * SENTINEL FAILOVER, then waits until every Sentinel reports the former
   * replica's address as the master; `master` and `replica` are swapped.
   */
  failover(): Promise<void>;
  /**
   * `kill -9` of the master, then waits until every Sentinel reports the replica as master (Sentinel's own
   * failover: down-after 1 s); `master` and `replica` are swapped. The SIGKILL is sent before this returns.
   */
  killMaster(): Promise<void>;
  /** Stops the Sentinels, then the data nodes, and deletes every folder. Safe to call more than once. */
  destroy(): Promise<void>;
}

export interface RedisSentinelOptions {
  /** Number of Sentinels (quorum is a majority of them). Default 1. */
  sentinels?: number;
  masterName?: string;
  timeoutMs?: number;
}

const parsePairs = (flat: unknown): Record<string, string> => {
  const out: Record<string, string> = {};
  const arr = flat as string[];
  for (let i = 0; i + 1 < arr.length; i += 2) out[arr[i]] = String(arr[i + 1]);
  return out;
};

async function waitForReplication(master: RedisProcess, replica: RedisProcess, timeoutMs: number): Promise<void> {
  await waitUntil(
    `replica ${replica.port} to sync from master ${master.port}`,
    async () => {
      const link = await withConnection(replica, async (c) => /master_link_status:up/.test(await c.info('replication')));
      if (!link) return 'replica link down';
      const info = await withConnection(master, (c) => c.info('replication'));
      return new RegExp(`^slave\\d+:ip=127\\.0\\.0\\.1,port=${replica.port},state=online`, 'm').test(info) || 'master does not list the replica online';
    },
    timeoutMs,
  );
}

const sentinelCall = (r: Redis, ...args: string[]) => r.call('SENTINEL', ...args);

/**
 * A master, one replica (`replicaof`), and Sentinels monitoring it as
 * `mymaster` with short down-after and failover timeouts. Resolves once every
 * Sentinel knows the master, the healthy replica, and (with several) each
 * other, so `failover()` can run at once. Cleans up after itself on failure.
 */
export async function startRedisSentinel(opts: RedisSentinelOptions = {}): Promise<RedisSentinelHandle> {
  const count = opts.sentinels ?? 1;
  const masterName = opts.masterName ?? 'mymaster';
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const quorum = Math.floor(count / 2) + 1;

  const dataArgs = (port: number, dir: string, extra: string[] = []) =>
    // A replica's full sync otherwise waits 5 s for more replicas to join the diskless transfer.
    dataNodeArgs(port, dir, {}, ['--repl-diskless-sync-delay', '0', ...extra]);

  const all: RedisProcess[] = [];
  const teardown = async (sentinelProcs: RedisProcess[]) => {
    // Sentinels first, so they do not react to the data nodes going away.
    await Promise.all(sentinelProcs.map((p) => p.stop()));
    await Promise.all(all.map((p) => p.stop()));
    for (const p of all) removeDir(p.dir);
  };

  let sentinelProcs: RedisProcess[] = [];
  let master!: RedisProcess;
  let replica!: RedisProcess;
  try {
    for (let attempt = 1; ; attempt++) {
      const [mPort, rPort, ...sPorts] = await freePorts(2 + count);
      const mDir = makeTempDir('rp-sent-master-');
      const rDir = makeTempDir('rp-sent-replica-');
      master = new RedisProcess(mPort, mDir, dataArgs(mPort, mDir));
      replica = new RedisProcess(rPort, rDir, dataArgs(rPort, rDir, ['--replicaof', '127.0.0.1', String(mPort)]));
      sentinelProcs = sPorts.map((port) => {
        const dir = makeTempDir('rp-sentinel-');
        const conf = join(dir, 'sentinel.conf');
        // Sentinel rewrites its config file, so it must be a writable file of its own.
        writeFileSync(
          conf,
          [
            `port ${port}`,
            'bind 127.0.0.1',
            `dir ${dir}`,
            `logfile ${join(dir, 'redis.log')}`,
            'daemonize no',
            'loglevel warning',
            `sentinel monitor ${masterName} 127.0.0.1 ${mPort} ${quorum}`,
            `sentinel down-after-milliseconds ${masterName} 1000`,
            `sentinel failover-timeout ${masterName} 5000`,
            `sentinel parallel-syncs ${masterName} 1`,
            '',
          ].join('\n'),
        );
        return new RedisProcess(port, dir, [conf, '--sentinel']);
      });
      all.push(master, replica, ...sentinelProcs);

      const dataUp = await Promise.allSettled([master.start(), replica.start()]);
      const dataOk = dataUp.every((s) => s.status === 'fulfilled');
      // Sentinel learns replicas from the master's INFO, which it polls every 10 s once running:
      // start it only when the master already lists the synced replica, so the first poll finds it.
      if (dataOk) await waitForReplication(master, replica, timeoutMs);
      const sentUp = dataOk ? await Promise.allSettled(sentinelProcs.map((p) => p.start())) : [];
      const failed = [...dataUp, ...sentUp].find((s) => s.status === 'rejected') as PromiseRejectedResult | undefined;
      if (!failed) break;
      await teardown(sentinelProcs);
      all.length = 0;
      if (attempt >= 3) throw failed.reason;
    }

    const r = replica;
    await waitUntil(
      'every Sentinel to see the master, the synced replica and each other',
      async () => {
        for (const s of sentinelProcs) {
          const problem = await withConnection(s, async (c) => {
            const mi = parsePairs(await sentinelCall(c, 'MASTER', masterName));
            if (mi.flags !== 'master') return `master flags ${mi.flags}`;
            if (Number(mi['num-other-sentinels']) !== count - 1) return `other sentinels ${mi['num-other-sentinels']}`;
            const replicas = ((await sentinelCall(c, 'REPLICAS', masterName)) as unknown[]).map(parsePairs);
            const rep = replicas.find((x) => Number(x.port) === r.port);
            if (!rep) return 'replica unknown to sentinel';
            if (rep.flags !== 'slave' || rep['master-link-status'] !== 'ok') return `replica ${rep.flags} ${rep['master-link-status']}`;
            return '';
          });
          if (problem) return `sentinel ${s.port}: ${problem}`;
        }
        return true;
      },
      timeoutMs,
    );
  } catch (err) {
    const logs = all.map((p) => `--- ${p.port}\n${p.logTail(10)}`).join('\n');
    await teardown(sentinelProcs);
    throw new Error(`${(err as Error).message}\n${logs}`, { cause: err });
  }

  let destroyed = false;
  const sentinels = sentinelProcs.map((p) => ({ host: p.host, port: p.port }));
  const handle: RedisSentinelHandle = {
    sentinels,
    envValue: sentinels.map((s) => `${s.host}:${s.port}`).join(','),
    masterName,
    master,
    replica,
    async failover() {
      await withConnection(sentinelProcs[0], (c) => sentinelCall(c, 'FAILOVER', masterName));
      await promoted();
    },
    async killMaster() {
      await handle.master.kill();
      await promoted();
    },
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      await teardown(sentinelProcs);
    },
  };
  /** Waits until every Sentinel reports the replica as master, then swaps `master` and `replica`. */
  async function promoted(): Promise<void> {
    const target = handle.replica;
    await waitUntil(
      `every Sentinel to report ${target.host}:${target.port} as master`,
      async () => {
        for (const s of sentinelProcs) {
          const addr = await withConnection(s, (c) => sentinelCall(c, 'GET-MASTER-ADDR-BY-NAME', masterName));
          const [host, port] = addr as [string, string];
          if (host !== target.host || Number(port) !== target.port) return `sentinel ${s.port} says ${host}:${port}`;
        }
        return true;
      },
      timeoutMs,
    );
    [handle.master, handle.replica] = [handle.replica, handle.master];
  }
  return handle;
}
