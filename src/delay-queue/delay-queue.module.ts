import { Global, Module } from '@nestjs/common';
import { DelayQueueAdminController } from './delay-queue.admin.controller';
import { DelayQueueMetrics } from './delay-queue.metrics';
import { DelayQueueService } from './delay-queue.service';

/** The shared delay-queue engine. Global: feature modules inject DelayQueueService. */
@Global()
@Module({
  controllers: [DelayQueueAdminController],
  providers: [DelayQueueService, DelayQueueMetrics],
  exports: [DelayQueueService],
})
export class DelayQueueModule {}
