import { Injectable, Logger } from '@nestjs/common';

/** Something that runs in the background (a queue consumer, a poller) and can be stopped. */
export interface BackgroundWorker {
  /** Stops taking new work and resolves once the work in hand is finished or handed back. */
  stop(): Promise<void>;
}

/**
 * Registry of background workers. On shutdown they are stopped after HTTP has
 * drained and before Redis connections close (RedisService calls `stopAll`).
 */
@Injectable()
export class BackgroundWorkers {
  private readonly logger = new Logger(BackgroundWorkers.name);
  private readonly workers = new Map<string, BackgroundWorker>();
  private stopping?: Promise<void>;

  register(name: string, worker: BackgroundWorker): void {
    if (this.workers.has(name)) throw new Error(`worker ${name} is already registered`);
    this.workers.set(name, worker);
  }

  get names(): string[] {
    return [...this.workers.keys()];
  }

  /** Stops every worker once; later calls wait for the same stop. */
  stopAll(): Promise<void> {
    this.stopping ??= Promise.all(
      [...this.workers].map(async ([name, w]) => {
        try {
          await w.stop();
        } catch (err) {
          this.logger.error({ worker: name, err: (err as Error).message }, 'worker failed to stop cleanly');
        }
      }),
    ).then(() => undefined);
    return this.stopping;
  }
}
