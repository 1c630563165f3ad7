/**
 * The delay-queue engine's public file: the module, the service other modules inject, and the
 * types of its calls. Inside src/engines/delay-queue files import each other directly.
 */
export { DelayQueueModule } from './delay-queue.module';
export { DelayQueueService } from './delay-queue.service';
export type { CancelResult, Delivery, Handler, ProcessOptions, QueueStats, ScheduleResult, When } from './delay-queue.types';
