import { Global, Module } from '@nestjs/common';
import { DelayQueueAdminController } from './delay-queue-admin.controller';
import { DelayQueueMetrics } from './delay-queue.metrics';
import { DelayQueueService } from './delay-queue.service';
import { DelayQueueStore } from './delay-queue.store';

/** The shared delay-queue engine. Global: feature modules inject DelayQueueService. */
@Global()
@Module({
  controllers: [DelayQueueAdminController],
  providers: [DelayQueueService, DelayQueueStore, DelayQueueMetrics],
  exports: [DelayQueueService],
})
export class DelayQueueModule {}
