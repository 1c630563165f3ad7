import { Inject, Injectable, Optional } from '@nestjs/common';
import { RedisService } from '../../platform/redis/redis.service';
import { ScriptRegistry } from '../../platform/scripts/script-registry.service';
import { BackgroundWorkers } from '../workers/background-workers.service';
import { CLOCK, type Clock, systemClock } from '../workers/clock';
import { StreamGroupOptions, StreamGroupRunner } from './stream-group-runner';
import { StreamsMetrics } from './streams.metrics';

/**
 * Starts stream consumer-group runners (see StreamGroupRunner) and has them stopped on shutdown with the other
 * background workers. Features declare their consumers with `@StreamConsumer` on a stream source (a module that owns
 * streams registers itself as their engine with the WorkerRegistry and starts runners through this).
 */
@Injectable()
export class StreamRunners {
  private readonly running = new Map<string, StreamGroupRunner>();

  constructor(
    private readonly redis: RedisService,
    private readonly scripts: ScriptRegistry,
    private readonly metrics: StreamsMetrics,
    private readonly workers: BackgroundWorkers,
    @Optional() @Inject(CLOCK) private readonly clock: Clock = systemClock,
  ) {}

  /**
   * Creates the group where missing and starts consuming (with Redis unreachable, once it answers). Rejects if
   * this runner name, group and consumer already run in this process.
   */
  async start(options: StreamGroupOptions): Promise<StreamGroupRunner> {
    const base = `streams:${options.name}:${options.group}:${options.consumer}`;
    if (this.running.get(base)?.isRunning) throw new Error(`worker ${base} is already running`);
    const runner = new StreamGroupRunner(options, { redis: this.redis, scripts: this.scripts, metrics: this.metrics, clock: this.clock });
    await runner.start();
    // A runner stopped earlier stays registered under the name: a restarted one gets the next free one.
    let name = base;
    for (let n = 2; this.workers.names.includes(name); n++) name = `${base}#${n}`;
    this.workers.register(name, runner);
    this.running.set(base, runner);
    return runner;
  }
}
