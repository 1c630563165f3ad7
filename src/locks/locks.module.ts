import { Global, Module } from '@nestjs/common';
import { LockMetrics } from './lock.metrics';
import { LockService } from './lock.service';
import { LocksController } from './locks.controller';

/** The shared lock engine. Global: feature modules inject LockService. */
@Global()
@Module({
  controllers: [LocksController],
  providers: [LockService, LockMetrics],
  exports: [LockService],
})
export class LocksModule {}
