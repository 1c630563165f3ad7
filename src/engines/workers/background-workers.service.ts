import { Injectable, Logger } from '@nestjs/common';

/** Something that runs in the background (a queue consumer, a poller) and can be stopped. */
export interface BackgroundWorker {
  /** Stops taking new work and resolves once the work in hand is finished or handed back. */
  stop(): Promise<void>;
}

/**
 * The running background workers of the process: the declared ones the WorkerRegistry started, and those an engine
 * started on a feature's behalf (a consumer group runner per rain). The WorkerRegistry stops them all on shutdown,
 * after HTTP has drained and before it closes the Redis connections.
 */
@Injectable()
export class BackgroundWorkers {
  private readonly logger = new Logger(BackgroundWorkers.name);
  private readonly workers = new Map<string, BackgroundWorker>();
  private stopping?: Promise<void>;

  register(name: string, worker: BackgroundWorker): void {
    if (this.workers.has(name)) throw new Error(`worker ${name} is already registered`);
    this.workers.set(name, worker);
    // Registered while stopping (a start that raced the shutdown): stopped at once, and waited for.
    if (this.stopping) this.stopping = Promise.all([this.stopping, this.stopOne(name, worker)]).then(() => undefined);
  }

  get names(): string[] {
    return [...this.workers.keys()];
  }

  /** Stops every worker once; later calls wait for the same stop. */
  stopAll(): Promise<void> {
    this.stopping ??= Promise.all([...this.workers].map(([name, w]) => this.stopOne(name, w))).then(() => undefined);
    return this.stopping;
  }

  private async stopOne(name: string, w: BackgroundWorker): Promise<void> {
    try {
      await w.stop();
    } catch (err) {
      this.logger.error({ worker: name, err: (err as Error).message }, 'worker failed to stop cleanly');
    }
  }
}
