import { execFile } from 'node:child_process';
import type Redis from 'ioredis';
import { dataNodeArgs, HostPort, RedisProcess, freePorts, makeTempDir, rawConnection, removeDir, waitUntil, withConnection } from './redis-process';

export type { HostPort };

// ---------------------------------------------------------------------------
// Cluster
// ---------------------------------------------------------------------------

export interface RedisClusterHandle {
  /** The master nodes, in creation order (node i owns the i-th third of the slots). */
  nodes: HostPort[];
  /** Value for REDIS_CLUSTER_NODES: `127.0.0.1:p1,127.0.0.1:p2,...`. */
  envValue: string;
  /** With `replicasPerMaster`: the replica nodes. */
  replicas: HostPort[];
  /** The processes, for tests that stop or restart a single node (masters first). */
  processes: RedisProcess[];
  /** Stops every node gracefully (AOF flushed); the data folders stay. */
  stop(): Promise<void>;
  /** stop() and delete every data folder. Safe to call more than once. */
  destroy(): Promise<void>;
}

export interface RedisClusterOptions {
  /** Number of masters. At least 3, as redis-cli requires. */
  masters?: number;
  /** Replicas of each master (default 0). */
  replicasPerMaster?: number;
  /** How long to wait for the whole cluster to be up and agreed. */
  timeoutMs?: number;
  /** AOF on every node (default true; benchmarks that compare with a standalone redis-server without AOF turn it off). */
  appendonly?: boolean;
}

function execCli(args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', args, { timeout: timeoutMs, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err) reject(new Error(`redis-cli ${args.join(' ')} failed: ${err.message}\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** The slot map a node reports, normalized to `start-end:port` entries so nodes can be compared. */
async function slotMap(r: Redis): Promise<string> {
  const slots = await r.cluster('SLOTS');
  return slots
    .map(([start, end, [, port]]) => `${start}-${end}:${port}`)
    .sort()
    .join(',');
}

/**
 * Starts `masters` cluster-enabled redis-servers (AOF on) on free ports in
 * temporary folders, joins them with `redis-cli --cluster create`, and
 * resolves once every node says `cluster_state:ok`, knows every other node,
 * and reports the same slot map. On any failure everything started is torn
 * down before the error is thrown.
 */
export async function startRedisCluster(opts: RedisClusterOptions = {}): Promise<RedisClusterHandle> {
  const masters = opts.masters ?? 3;
  const perMaster = opts.replicasPerMaster ?? 0;
  const total = masters * (1 + perMaster);
  const timeoutMs = opts.timeoutMs ?? 20_000;
  if (masters < 3) throw new Error('a Redis cluster needs at least 3 masters');

  const procs: RedisProcess[] = [];
  const destroyAll = async () => {
    await Promise.all(procs.map((p) => p.stop()));
    for (const p of procs) removeDir(p.dir);
  };

  try {
    // A port picked by freePort() can be taken by someone else before redis binds it: retry with new ports.
    for (let attempt = 1; ; attempt++) {
      const ports = await freePorts(total * 2);
      const batch = Array.from({ length: total }, (_, i) => {
        const port = ports[i];
        const busPort = ports[total + i];
        const dir = makeTempDir('rp-cluster-');
        return new RedisProcess(
          port,
          dir,
          dataNodeArgs(port, dir, { appendonly: opts.appendonly }, [
            // The bus port is chosen explicitly: port + 10000 may be above 65535 for an ephemeral port.
            '--cluster-port',
            String(busPort),
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            'nodes.conf',
            '--cluster-node-timeout',
            '5000',
          ]),
        );
      });
      procs.push(...batch);
      const started = await Promise.allSettled(batch.map((p) => p.start()));
      const failed = started.find((s) => s.status === 'rejected');
      if (!failed) break;
      await destroyAll();
      procs.length = 0;
      if (attempt >= 3) throw (failed as PromiseRejectedResult).reason;
    }

    const addrs = procs.map((p) => `${p.host}:${p.port}`);
    await execCli(['--cluster', 'create', ...addrs, '--cluster-replicas', String(perMaster), '--cluster-yes'], timeoutMs);

    // redis-cli returns once the nodes agree on its own check; wait until every node sees the whole, healthy cluster.
    const conns = procs.map((p) => rawConnection(p));
    try {
      await waitUntil(
        'every cluster node to report cluster_state:ok and the same slot map',
        async () => {
          const views = await Promise.all(
            conns.map(async (r) => {
              const info = String(await r.cluster('INFO'));
              const field = (name: string) => new RegExp(`^${name}:(\\S+)`, 'm').exec(info)?.[1];
              if (field('cluster_state') !== 'ok') return `state ${field('cluster_state')}`;
              if (Number(field('cluster_slots_assigned')) !== 16384) return `slots ${field('cluster_slots_assigned')}`;
              if (Number(field('cluster_known_nodes')) !== total) return `known nodes ${field('cluster_known_nodes')}`;
              const replication = await r.info('replication');
              if (/^role:slave/m.test(replication) && !/^master_link_status:up/m.test(replication)) return 'replica not in sync';
              if (/^role:master/m.test(replication) && Number(/^connected_slaves:(\d+)/m.exec(replication)?.[1]) !== perMaster) return 'replicas missing';
              return `map ${await slotMap(r)}`;
            }),
          );
          if (!views.every((v) => v.startsWith('map ')) || new Set(views).size !== 1) return views.join(' | ');
          return true;
        },
        timeoutMs,
      );
    } finally {
      conns.forEach((c) => c.disconnect());
    }
  } catch (err) {
    const logs = procs.map((p) => `--- ${p.port}\n${p.logTail(10)}`).join('\n');
    await destroyAll();
    throw new Error(`${(err as Error).message}\n${logs}`, { cause: err });
  }

  // redis-cli picks which nodes become masters: ask each one, and list the masters first.
  const roles = await Promise.all(procs.map((p) => withConnection(p, async (c) => /^role:master/m.test(await c.info('replication')))));
  const ordered = [...procs.filter((_, i) => roles[i]), ...procs.filter((_, i) => !roles[i])];
  procs.splice(0, procs.length, ...ordered);
  const all = procs.map((p) => ({ host: p.host, port: p.port }));
  const nodes = all.slice(0, masters);
  let destroyed = false;
  return {
    nodes,
    replicas: all.slice(masters),
    envValue: nodes.map((n) => `${n.host}:${n.port}`).join(','),
    processes: procs,
    async stop() {
      await Promise.all(procs.map((p) => p.stop()));
    },
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      await destroyAll();
    },
  };
}
