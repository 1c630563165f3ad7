import { Cluster } from 'ioredis';
import type Redis from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import type { Counter, Histogram } from 'prom-client';
import type { RedisClient } from '../redis/redis.service';
import { WriteUnconfirmedError } from './write-unconfirmed.error';

/** What ReplicaWait records: the latency of each WAIT, and the writes it could not confirm, by script. */
export interface ReplicaWaitMetrics {
  latency: Histogram;
  unconfirmed: Counter<'script'>;
}

/**
 * Makes a durable write wait for its replicas: `WAIT <replicas> <timeoutMs>` on
 * the connection that ran the script (the master; on a cluster, the master that
 * owns the slot of the script's first key). WAIT counts the replicas that have
 * every write this connection made before it, so one WAIT answers for every
 * durable reply that arrives while it is out: those writes were sent before it.
 * That keeps a stalled replica from queueing one full timeout per write.
 */
export class ReplicaWait {
  /** Per node and per replica count, the WAIT sent and not yet answered. */
  private readonly inFlight = new WeakMap<Redis, Map<number, Promise<number>>>();

  constructor(
    private readonly client: RedisClient,
    private readonly timeoutMs: number,
    /** Retry-After of WRITE_UNCONFIRMED. */
    private readonly retryAfterMs: number,
    private readonly metrics: ReplicaWaitMetrics,
  ) {}

  /**
   * Resolves with `result` once `replicas` replicas have every write made so far on the node of `firstKey`;
   * rejects with WriteUnconfirmedError when fewer confirm within the timeout or the WAIT fails.
   */
  confirm<T>(script: string, firstKey: string, replicas: number, result: T): Promise<T> {
    const unconfirmed = (confirmed: number | undefined): never => {
      this.metrics.unconfirmed.inc({ script });
      throw new WriteUnconfirmedError(replicas, confirmed, this.retryAfterMs);
    };
    const node = this.nodeOf(firstKey);
    if (!node) return Promise.resolve().then(() => unconfirmed(undefined));
    return this.waitOn(node, replicas).then(
      (confirmed) => (confirmed >= replicas ? result : unconfirmed(confirmed)),
      () => unconfirmed(undefined),
    );
  }

  /** The connection that ran a script whose first key is `key`. */
  nodeOf(key: string): Redis | undefined {
    if (!(this.client instanceof Cluster)) return this.client;
    const owner = this.client.slots[calculateSlot(key)]?.[0];
    return this.client.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === owner);
  }

  private waitOn(node: Redis, replicas: number): Promise<number> {
    let byCount = this.inFlight.get(node);
    if (!byCount) this.inFlight.set(node, (byCount = new Map()));
    const joined = byCount.get(replicas);
    if (joined) return joined;
    const started = performance.now();
    const counts = byCount;
    const sent = node.wait(replicas, this.timeoutMs).finally(() => {
      counts.delete(replicas);
      this.metrics.latency.observe((performance.now() - started) / 1000);
    });
    counts.set(replicas, sent);
    return sent;
  }
}
