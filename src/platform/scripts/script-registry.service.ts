import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { DurabilityClass } from '../config/app-config';
import type Redis from 'ioredis';
import { ConfigError } from '../config/config.error';
import { RedisUnavailableError } from '../redis/redis-unavailable.error';
import { RedisService } from '../redis/redis.service';
import { evalScript, type ScriptArg } from './eval-script';
import { ReplicaWait } from './replica-wait';
import { scriptErrorFor } from './script.errors';
import { DEFAULT_LUA_DIR, loadAllScripts, ScriptDefinition } from './script-loader';

export type { ScriptArg } from './eval-script';

/**
 * Every Lua script under `lua/`, loaded from disk once. At boot each script is
 * SCRIPT LOADed on every master; calls go by EVALSHA, and a node that answers
 * NOSCRIPT (after a restart or failover) gets that call again as EVAL, which
 * caches the script there. Modules call scripts only through typed wrappers
 * that use `run()`.
 */
@Injectable()
export class ScriptRegistry implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(ScriptRegistry.name);
  private readonly scripts: Map<string, ScriptDefinition>;
  /** Per script, what turns its reply into run()'s result (a negative integer: its ScriptError); made once, not per call. */
  private readonly results = new Map<string, (result: unknown) => unknown>();
  /** A failed call, classified and counted by RedisService. */
  private readonly fail = (err: unknown): never => {
    throw this.redis.failure(err);
  };
  /** Per durable script, how many replicas its writes wait for (only scripts that wait: > 0). */
  private readonly waitFor = new Map<string, number>();
  private readonly replicaWait?: ReplicaWait;
  private loaded = false;
  private retryTimer?: NodeJS.Timeout;
  private stopped = false;

  constructor(private readonly redis: RedisService) {
    this.scripts = loadAllScripts(DEFAULT_LUA_DIR);
    for (const id of this.scripts.keys()) {
      this.results.set(id, (result) => {
        if (typeof result === 'number' && result < 0) throw scriptErrorFor(id, result);
        return result;
      });
    }
    const { replicas, timeoutMs } = this.redis.config.durability;
    for (const def of this.scripts.values()) {
      const wanted = def.contract.durable ? replicas[def.contract.durable] : 0;
      if (wanted > 0) this.waitFor.set(def.id, wanted);
    }
    // Registered whatever the setting, so dashboards and alerts find the series (at 0 with no durable writes).
    const metrics = this.redis.metrics;
    const replicaMetrics = {
      latency: metrics.histogram(
        'durability_wait_seconds',
        'Time durable writes waited for their replicas (WAIT)',
        [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      ),
      unconfirmed: metrics.counter('durability_unconfirmed_writes_total', 'Durable writes answered WRITE_UNCONFIRMED (too few replicas in time), by script', [
        'script',
      ]),
    };
    const wanted = Math.max(0, ...this.waitFor.values());
    const service = this.redis;
    metrics.gauge(
      'durability_replicas_missing',
      'Replicas the emptiest Redis master lacks for DURABILITY_REPLICAS / DURABILITY_MESSAGES_REPLICAS (0: enough, or no durable writes); asked of Redis at scrape time, absent when it does not answer',
      [],
      async function () {
        this.reset();
        if (wanted === 0) return this.set(0);
        // Whatever fails (a master that does not answer) leaves the gauge empty, never the scrape failed.
        try {
          const [fewest] = await service.connectedReplicas();
          if (fewest !== undefined) this.set(Math.max(0, wanted - fewest));
        } catch {
          // left empty
        }
      },
    );
    if (this.waitFor.size > 0) {
      this.replicaWait = new ReplicaWait(this.redis.client, timeoutMs, this.redis.config.redis.retryAfterS * 1000, replicaMetrics);
    }
    // A restarted or new node has an empty script cache: load again whenever the connection comes back.
    this.redis.client.on('ready', () => {
      if (this.loaded) void this.loadAll().catch(() => undefined);
    });
  }

  /** True once every script has been loaded on every master. */
  get isLoaded(): boolean {
    return this.loaded;
  }

  list(): ScriptDefinition[] {
    return [...this.scripts.values()];
  }

  get(id: string): ScriptDefinition {
    const def = this.scripts.get(id);
    if (!def) throw new Error(`unknown script ${id}`);
    return def;
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.warm();
  }

  onApplicationShutdown(): void {
    this.stopped = true;
    clearTimeout(this.retryTimer);
  }

  /**
   * Connects, loads the scripts and checks the replicas durable writes need; on failure retries every second in
   * the background until it succeeds. Too few replicas for DURABILITY_REPLICAS fails the boot in production.
   */
  private async warm(first = true): Promise<void> {
    try {
      await this.redis.warmUp();
      await this.loadAll();
      this.logger.log({ scripts: this.scripts.size, masters: this.redis.masters().length }, 'redis warm, scripts loaded');
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'redis not ready yet; retrying');
      if (!this.stopped) this.retryTimer = setTimeout(() => void this.warm(false), 1000);
      return;
    }
    try {
      await this.checkReplicas();
    } catch (err) {
      if (first) throw err;
      this.logger.error({ err: (err as Error).message }, 'durable writes will be answered WRITE_UNCONFIRMED');
    }
    try {
      await this.checkEviction();
    } catch (err) {
      if (first) throw err;
      this.logger.error({ err: (err as Error).message }, 'the Redis evicts keys: acknowledged state may vanish');
    }
  }

  /**
   * Every key of the core Redis is state the service has acknowledged (orders, wallets, locks, queues), most of
   * them with a retention TTL, so any eviction policy, volatile-* included, can drop it silently under memory
   * pressure. Only `noeviction` (a write refused instead) is safe: anything else is refused in production (naming
   * the topology's variable), a warning elsewhere. A master that cannot be asked now is not a refusal.
   */
  private async checkEviction(): Promise<void> {
    const policies = await this.redis.evictionPolicies().catch(() => []);
    const evicting = policies.find((p) => p !== 'noeviction');
    if (evicting === undefined) return;
    const mode = this.redis.config.redis.topology.mode;
    const variable = mode === 'sentinel' ? 'REDIS_SENTINELS' : mode === 'cluster' ? 'REDIS_CLUSTER_NODES' : 'REDIS_URL';
    const problem = `names a Redis with maxmemory-policy ${evicting}: it would drop acknowledged state (orders, wallets, locks) under memory pressure; the service needs maxmemory-policy noeviction (caches go to REDIS_CACHE_URL)`;
    if (this.redis.config.env === 'production') throw new ConfigError(variable, problem);
    this.logger.warn({ variable, policy: evicting }, `${variable} ${problem}`);
  }

  /**
   * With durable writes waiting for replicas, every master must have that many: refused (ConfigError naming the
   * variable) in production, a warning elsewhere. A master that cannot be asked now is not a refusal.
   */
  private async checkReplicas(): Promise<void> {
    const wanted = Math.max(0, ...this.waitFor.values());
    if (wanted === 0) return;
    const fewest = (await this.redis.connectedReplicas().catch(() => [wanted]))[0] ?? 0;
    if (fewest >= wanted) return;
    const { replicas } = this.redis.config.durability;
    const variable = replicas.money >= replicas.messages ? 'DURABILITY_REPLICAS' : 'DURABILITY_MESSAGES_REPLICAS';
    const problem = `is ${wanted} but a Redis master has ${fewest} connected replica(s); durable writes would be answered WRITE_UNCONFIRMED`;
    if (this.redis.config.env === 'production') throw new ConfigError(variable, problem);
    this.logger.warn({ variable, wanted, connected: fewest }, `${variable} ${problem}`);
  }

  /** SCRIPT LOAD of every script on every master node. */
  async loadAll(): Promise<void> {
    const masters = this.redis.masters();
    if (masters.length === 0) throw new RedisUnavailableError();
    await Promise.all(masters.map((node) => this.loadOn(node)));
    this.loaded = true;
  }

  private async loadOn(node: Redis): Promise<void> {
    const pipeline = node.pipeline();
    for (const def of this.scripts.values()) pipeline.script('LOAD', def.source);
    const results = (await pipeline.exec()) ?? [];
    const defs = [...this.scripts.values()];
    results.forEach(([err, sha], i) => {
      if (err) throw err;
      if (sha !== defs[i].sha) throw new Error(`script ${defs[i].id} loaded with sha ${String(sha)}, expected ${defs[i].sha}`);
    });
  }

  /**
   * Makes a durable write done with plain commands (no script) wait for its replicas, as a durable script's reply
   * does: resolves once the replicas of class `durable` have every write made so far on the node of `key`
   * (WriteUnconfirmedError when too few confirm in time), at once when that class waits for none. `label` names the
   * write in durability_unconfirmed_writes_total.
   */
  confirmWrite(label: string, key: string, durable: DurabilityClass): Promise<void> {
    const replicas = this.redis.config.durability.replicas[durable];
    if (!replicas || !this.replicaWait) return Promise.resolve();
    return this.replicaWait.confirm(label, key, replicas, undefined);
  }

  /**
   * Runs a script by EVALSHA. A negative integer result is a script result code
   * and becomes a typed `ScriptError`; an unreachable Redis becomes `RedisUnavailableError`.
   * A durable script (`Durable:` in its contract) with replicas configured then waits for them:
   * too few in time becomes `WriteUnconfirmedError`.
   */
  run<T = unknown>(id: string, keys: readonly string[], args: readonly ScriptArg[] = []): Promise<T> {
    // Chained, not awaited: every call of every module goes through here, and each async layer is a promise more.
    try {
      const def = this.get(id);
      if (keys.length !== def.numberOfKeys) throw new Error(`script ${id} takes ${def.numberOfKeys} keys, got ${keys.length}`);
      const ran = evalScript(this.redis.client, def, keys, args, this.results.get(id), this.fail) as Promise<T>;
      const replicas = this.waitFor.get(id);
      // Durable: acknowledged only once `replicas` replicas have the write (docs/durability.md).
      return replicas === undefined ? ran : ran.then((result) => this.replicaWait!.confirm(id, keys[0], replicas, result));
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }
}
