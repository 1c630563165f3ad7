import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type Redis from 'ioredis';
import { RedisUnavailableError } from '../redis/redis-unavailable.error';
import { RedisService } from '../redis/redis.service';
import { evalScript, type ScriptArg } from './eval-script';
import { scriptErrorFor } from './script-errors';
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

  /** Connects and loads the scripts; on failure retries every second in the background until it succeeds. */
  private async warm(): Promise<void> {
    try {
      await this.redis.warmUp();
      await this.loadAll();
      this.logger.log({ scripts: this.scripts.size, masters: this.redis.masters().length }, 'redis warm, scripts loaded');
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'redis not ready yet; retrying');
      if (!this.stopped) this.retryTimer = setTimeout(() => void this.warm(), 1000);
    }
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
   * Runs a script by EVALSHA. A negative integer result is a script result code
   * and becomes a typed `ScriptError`; an unreachable Redis becomes `RedisUnavailableError`.
   */
  run<T = unknown>(id: string, keys: readonly string[], args: readonly ScriptArg[] = []): Promise<T> {
    // Chained, not awaited: every call of every module goes through here, and each async layer is a promise more.
    try {
      const def = this.get(id);
      if (keys.length !== def.numberOfKeys) throw new Error(`script ${id} takes ${def.numberOfKeys} keys, got ${keys.length}`);
      return evalScript(this.redis.client, def, keys, args, this.results.get(id), this.fail) as Promise<T>;
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }
}
