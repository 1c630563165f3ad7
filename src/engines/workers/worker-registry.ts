import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown, type Type } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, ModuleRef } from '@nestjs/core';
import { MetricsService } from '../../platform/metrics/metrics.service';
import { RedisService } from '../../platform/redis/redis.service';
import { BackgroundWorkers } from './background-workers.service';
import { CLOCK, type Clock } from './clock';
import { PeriodicJobRunner } from './periodic-job';
import type { RetryPolicy } from './retry-policy';
import {
  declarationsOf,
  isConfigured,
  type PeriodicJobSpec,
  type Resolve,
  type RetryDeclaration,
  type Setting,
  workerName,
  type WorkerSpec,
} from './worker-declarations';

/** What a delivery engine tells the registry: how it starts a declared worker, and what the table shows of it. */
export interface WorkerEngine {
  /** The engine's retry policy where a declaration leaves a field out. */
  defaults: RetryPolicy;
  /** The table's columns for a declaration of this engine. */
  trigger(spec: WorkerSpec['spec']): string;
  deadLetter(spec: WorkerSpec['spec']): string;
  metric(spec: WorkerSpec['spec']): string;
  /**
   * Once Redis answers after boot: the names of work this engine holds that no declaration handles (a delay queue
   * with items and no handler in this build), given the declarations of this engine and the queues periodic jobs drain.
   */
  unhandled?(declared: WorkerSpec['spec'][], drained: string[]): Promise<string[]>;
  /** Starts the worker (and registers it with BackgroundWorkers): `handler` is the declared method, bound to its provider. */
  start(spec: WorkerSpec['spec'], handler: (arg: any) => Promise<unknown>, retry: RetryPolicy, options: Record<string, unknown>): Promise<unknown>;
}

/** One discovered declaration. */
export interface Declared {
  name: string;
  decl: WorkerSpec;
  /** `Class.method`, for messages. */
  where: string;
  handler: (...args: any[]) => Promise<unknown>;
}

/** One row of the background-work table. */
export interface WorkerRow {
  name: string;
  trigger: string;
  lease: string;
  retry: string;
  deadLetter: string;
  metric: string;
}

/** The engine key of a declaration: the delay queue, a stream source, or the registry's own periodic jobs. */
const engineOf = (d: WorkerSpec) => (d.kind === 'delay-queue' ? 'delay-queue' : d.kind === 'stream-consumer' ? `stream:${d.spec.stream}` : 'periodic');

/** Durations as the table shows them. */
export function shownMs(ms: number): string {
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms >= 1000 && ms % 1000 === 0) return `${ms / 1000} s`;
  return `${ms} ms`;
}

/**
 * The one owner of the background work's life. At boot it finds every declared worker (`@DelayQueueHandler`,
 * `@StreamConsumer`, `@PeriodicJob` on provider methods), refuses two declarations of one worker or one whose engine
 * is missing, and starts them in declaration order. On shutdown, after HTTP has drained: every worker stops taking
 * work and finishes or hands back what it holds, and only then are the Redis connections closed. Workers an engine starts on a feature's behalf (one per
 * entity) are in the same BackgroundWorkers, and stopped the same way.
 */
@Injectable()
export class WorkerRegistry implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(WorkerRegistry.name);
  private readonly engines = new Map<string, WorkerEngine>();
  private readonly jobs = new Map<string, PeriodicJobRunner>();
  private found?: Declared[];
  /** Set on shutdown: the boot-time check gives up. */
  private closing = false;
  private readonly runs;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly moduleRef: ModuleRef,
    private readonly redis: RedisService,
    private readonly workers: BackgroundWorkers,
    @Inject(CLOCK) private readonly clock: Clock,
    metrics: MetricsService,
  ) {
    this.runs = metrics.counter(
      'background_job_runs_total',
      'Runs of the periodic jobs, by job and outcome (ok, failed, skipped: another instance holds the lease)',
      ['job', 'outcome'],
    );
  }

  /** An engine registers itself (in its constructor): the delay queue as `delay-queue`, a stream source as `stream:<source>`. */
  provide(key: string, engine: WorkerEngine): void {
    if (this.engines.has(key)) throw new Error(`worker engine ${key} is provided twice`);
    this.engines.set(key, engine);
  }

  /** Every declaration in the app, in discovery order. Throws on two declarations of one worker. */
  declarations(): Declared[] {
    if (this.found) return this.found;
    const found: Declared[] = [];
    for (const wrapper of this.discovery.getProviders()) {
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      if (!instance || typeof instance !== 'object' || !wrapper.isDependencyTreeStatic()) continue;
      const proto = Object.getPrototypeOf(instance) as object;
      for (const method of this.scanner.getAllMethodNames(proto)) {
        for (const decl of declarationsOf(proto, method)) {
          const name = workerName(decl);
          const where = `${instance.constructor.name}.${method}`;
          const twin = found.find((f) => f.name === name);
          if (twin) throw new Error(`background worker ${name} is declared twice: ${twin.where} and ${where}`);
          // Looked up when work arrives: the method as it is then (a test's spy included).
          const handler = (...args: unknown[]) => (instance[method] as (...a: unknown[]) => Promise<unknown>)(...args);
          found.push({ name, decl, where, handler });
        }
      }
    }
    this.found = found;
    return found;
  }

  /** The declaration `name` with its retry policy and options resolved (for workers their feature starts itself). */
  declared(name: string): { retry: RetryPolicy; options: Record<string, unknown> } {
    const d = this.declarations().find((x) => x.name === name);
    if (!d) throw new Error(`background worker ${name} is not declared`);
    return { retry: this.retryOf(d.decl), options: d.decl.kind === 'periodic' ? {} : (d.decl.spec.options?.(this.get) ?? {}) };
  }

  /** The names of the running workers: the declared ones and those started on a feature's behalf. */
  get names(): string[] {
    return this.workers.names;
  }

  /** The periodic job `name` (its runOnce runs it now, under its lease). */
  job(name: string): PeriodicJobRunner {
    const j = this.jobs.get(name);
    if (!j) throw new Error(`no periodic job ${name}`);
    return j;
  }

  async onApplicationBootstrap(): Promise<void> {
    const all = this.declarations();
    for (const d of all)
      if (d.decl.kind !== 'periodic' && !this.engines.has(engineOf(d.decl)))
        throw new Error(`${d.where} declares ${d.name}, but no engine ${engineOf(d.decl)} is provided`);
    for (const d of all) {
      if (d.decl.kind === 'stream-consumer' && d.decl.spec.startedPer) continue;
      if (d.decl.kind === 'periodic') {
        const job = this.periodic(d.decl.spec, d.handler);
        this.jobs.set(d.name, job);
        this.workers.register(d.name, job);
        job.start();
        continue;
      }
      const engine = this.engines.get(engineOf(d.decl))!;
      // The engine registers what it starts with BackgroundWorkers (as for workers started on a feature's behalf).
      await engine.start(d.decl.spec, d.handler, this.retryOf(d.decl), d.decl.spec.options?.(this.get) ?? {});
    }
    this.logger.log({ workers: this.workers.names }, 'background workers started');
    // Not awaited: the service boots (and answers 503) while Redis is down.
    void this.checkUnhandled(all);
  }

  /**
   * After HTTP has drained (Nest runs this hook after closing the server, and this module's first: it is global):
   * every worker stops at once, each finishing or handing back the work it holds; then the Redis connections close.
   */
  async onApplicationShutdown(): Promise<void> {
    this.closing = true;
    await this.workers.stopAll();
    await this.redis.close();
  }

  /**
   * Logs, at error, work an engine holds that nothing in this build handles (a queue with items and no handler): it
   * would wait forever. Not a boot error: during a rolling deploy the instances of the previous build may still hold
   * it, and a boot must not fail while they do. Tried until Redis answers, at most a minute.
   */
  private async checkUnhandled(all: Declared[]): Promise<void> {
    const drained = all.flatMap((d) => (d.decl.kind === 'periodic' ? (d.decl.spec.drains ?? []) : []));
    for (const [key, engine] of this.engines) {
      if (!engine.unhandled) continue;
      const declared = all.filter((d) => engineOf(d.decl) === key).map((d) => d.decl.spec);
      for (let attempt = 1; attempt <= 12 && !this.closing; attempt++) {
        try {
          for (const name of await engine.unhandled(declared, drained)) {
            this.logger.error({ engine: key, worker: name }, 'work waits that no declared worker of this build handles: declare its handler, or drain it');
          }
          break;
        } catch {
          await new Promise((r) => this.clock.setTimeout(() => r(undefined), 5000));
        }
      }
    }
  }

  /** The background-work table as the code declares it, sorted by name. */
  rows(): WorkerRow[] {
    return this.declarations()
      .map(({ name, decl }) => {
        if (decl.kind === 'periodic') {
          const s = decl.spec;
          return {
            name,
            trigger: `every ${this.shown(s.everyMs, shownMs)}${s.runAtStart ? ', and at boot' : ''}`,
            lease: s.lease ? `\`${s.lease.shown}\`` : 'none (every instance)',
            retry: s.backoff ? `next run after backoff ${shownMs(s.backoff.initialMs)} → ${shownMs(s.backoff.maxMs)}` : 'next period',
            deadLetter: 'none (logged)',
            metric: [`background_job_runs_total{job}`, s.metric].filter(Boolean).join(', '),
          };
        }
        const engine = this.engines.get(engineOf(decl));
        if (!engine) throw new Error(`no engine ${engineOf(decl)} for ${name}`);
        return {
          name,
          trigger: engine.trigger(decl.spec),
          lease: 'none (competing consumers)',
          retry: this.shownRetry(decl.spec.retry, engine.defaults),
          deadLetter: engine.deadLetter(decl.spec),
          metric: [engine.metric(decl.spec), decl.spec.metric].filter(Boolean).join(', '),
        };
      })
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  private readonly get: Resolve = <T>(token: Type<T>) => this.moduleRef.get(token, { strict: false });

  private value<T>(v: Setting<T>): T {
    return isConfigured(v) ? v.value(this.get) : v;
  }

  private shown<T>(v: Setting<T>, show: (x: T) => string): string {
    return isConfigured(v) ? `\`${v.setting}\`` : show(v);
  }

  private retryOf(d: WorkerSpec): RetryPolicy {
    const engine = d.kind === 'periodic' ? undefined : this.engines.get(engineOf(d));
    if (!engine || d.kind === 'periodic') throw new Error(`${workerName(d)} has no retry policy`);
    const r = d.spec.retry ?? {};
    const def = engine.defaults;
    return {
      attempts: r.attempts !== undefined ? this.value(r.attempts) : def.attempts,
      visibilityMs: r.visibilityMs !== undefined ? this.value(r.visibilityMs) : def.visibilityMs,
      backoff: {
        initialMs: r.backoff?.initialMs !== undefined ? this.value(r.backoff.initialMs) : def.backoff.initialMs,
        maxMs: r.backoff?.maxMs !== undefined ? this.value(r.backoff.maxMs) : def.backoff.maxMs,
        factor: r.backoff?.factor ?? def.backoff.factor ?? 2,
      },
    };
  }

  private shownRetry(r: RetryDeclaration = {}, def: RetryPolicy): string {
    const n = (x: number) => String(x);
    const attempts = this.shown(r.attempts ?? def.attempts, n);
    const initial = this.shown(r.backoff?.initialMs ?? def.backoff.initialMs, shownMs);
    const max = this.shown(r.backoff?.maxMs ?? def.backoff.maxMs, shownMs);
    const visibility = this.shown(r.visibilityMs ?? def.visibilityMs, shownMs);
    const backoff = initial === '0 ms' && max === '0 ms' ? 'none' : `${initial} → ${max}`;
    return `attempts ${attempts}; backoff ${backoff}; visibility ${visibility}`;
  }

  private periodic(s: PeriodicJobSpec, handler: () => Promise<unknown>): PeriodicJobRunner {
    const everyMs = this.value(s.everyMs);
    return new PeriodicJobRunner(
      {
        name: s.name,
        everyMs,
        run: handler,
        lease: s.lease ? { key: s.lease.key(this.get), ttlMs: s.lease.ttlMs ?? Math.max(100, everyMs - 50) } : undefined,
        runAtStart: s.runAtStart ?? false,
        backoff: s.backoff,
      },
      { redis: this.redis, clock: this.clock, runs: this.runs },
    );
  }
}
