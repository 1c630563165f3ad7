import { Global, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { BackgroundWorkers } from './background-workers.service';
import { CLOCK, systemClock } from './clock';
import { WorkerRegistry } from './worker-registry';

/**
 * The background-work platform: the clock every engine takes (CLOCK) and the worker registry, which finds the
 * declared workers at boot and owns the order of start, drain and stop, and the Redis connections' close after them.
 */
@Global()
@Module({
  imports: [DiscoveryModule],
  providers: [{ provide: CLOCK, useValue: systemClock }, BackgroundWorkers, WorkerRegistry],
  exports: [CLOCK, BackgroundWorkers, WorkerRegistry],
})
export class WorkersModule {}
