import { Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Counter } from 'prom-client';
import type { RedisService } from '../../platform/redis/redis.service';
import type { BackgroundWorker } from './background-workers.service';
import type { Clock, Timer } from './clock';
import { backoffDelay } from './retry-policy';

export interface PeriodicJobSettings {
  name: string;
  everyMs: number;
  /** The job; `signal` aborts when the worker stops (a long run should return early). */
  run: (signal: AbortSignal) => Promise<unknown>;
  /** One instance at a time: the run is skipped unless SET `key` NX PX `ttlMs` succeeds. */
  lease?: { key: string; ttlMs: number };
  runAtStart: boolean;
  backoff?: { initialMs: number; maxMs: number };
}

/** This process's lease owner token. */
const OWNER = randomUUID();

/**
 * A job run every `everyMs` (counted from the end of the previous run, so runs never overlap), by every instance,
 * or under a lease by one at a time. A failed run is logged and run again after its backoff (at most a period);
 * stop() lets the run in hand finish.
 */
export class PeriodicJobRunner implements BackgroundWorker {
  private readonly logger: Logger;
  private timer?: Timer;
  private running?: Promise<void>;
  private stopped = false;
  private failures = 0;
  private readonly abort = new AbortController();

  constructor(
    private readonly s: PeriodicJobSettings,
    private readonly deps: { redis: RedisService; clock: Clock; runs: Counter<'job' | 'outcome'> },
  ) {
    this.logger = new Logger(`PeriodicJob:${s.name}`);
  }

  start(): void {
    this.schedule(this.s.runAtStart ? 0 : this.s.everyMs);
  }

  /** Runs the job once now (under its lease, if any), unless a run is under way: then waits for that one. */
  runOnce(): Promise<void> {
    this.running ??= this.tick().finally(() => (this.running = undefined));
    return this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort(new Error('worker stopping'));
    this.deps.clock.clearTimeout(this.timer);
    await this.running;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = this.deps.clock.setTimeout(() => {
      void this.runOnce().finally(() => {
        const b = this.s.backoff;
        const next = this.failures > 0 && b ? Math.min(this.s.everyMs, backoffDelay(this.failures, b, this.deps.clock.random)) : this.s.everyMs;
        this.schedule(next);
      });
    }, ms);
  }

  private async tick(): Promise<void> {
    const labels = { job: this.s.name };
    try {
      if (this.s.lease && !(await this.takeLease(this.s.lease))) {
        this.deps.runs.inc({ ...labels, outcome: 'skipped' });
        return;
      }
      await this.s.run(this.abort.signal);
      this.failures = 0;
      this.deps.runs.inc({ ...labels, outcome: 'ok' });
    } catch (err) {
      this.failures++;
      this.deps.runs.inc({ ...labels, outcome: 'failed' });
      if (this.failures === 1) this.logger.warn({ job: this.s.name, err: (err as Error).message }, 'periodic job failed; it runs again');
    }
  }

  private async takeLease({ key, ttlMs }: { key: string; ttlMs: number }): Promise<boolean> {
    return (await this.deps.redis.command((c) => c.set(key, OWNER, 'PX', ttlMs, 'NX'))) === 'OK';
  }
}
