import { Module } from '@nestjs/common';
import { LocksModule } from '../../engines/locks/locks.module';
import { OrdersModule } from '../orders';
import { ActivitiesService } from './seckill-activities.service';
import { ActivityCatalog } from './activity-catalog';
import { ListingService } from './listing.service';
import { ReservationsService } from './reservations.service';
import { SafetyNet } from './safety-net';
import { SeckillAdminController } from './seckill-admin.controller';
import { SeckillController } from './seckill.controller';
import { seckillConfig } from './seckill.config';
import { SeckillMetrics } from './seckill.metrics';
import { SeckillStore } from './seckill.store';
import { ProductSoldOutMemory } from './product-sold-out';

/** Flash sales: weekly activities, a cached listing, one-script reservations that never oversell, stock returned when a payment fails. */
@Module({
  imports: [
    OrdersModule,
    LocksModule.forFeature('seckill', { 'seckill-activity': { leaseMs: 120_000, waitMs: 5_000 }, 'seckill-gather': { leaseMs: 2_000, waitMs: 3_000 } }),
  ],
  controllers: [SeckillController, SeckillAdminController],
  providers: [
    seckillConfig.provider,
    SeckillStore,
    ActivityCatalog,
    ProductSoldOutMemory,
    ActivitiesService,
    ReservationsService,
    SafetyNet,
    ListingService,
    SeckillMetrics,
  ],
})
export class SeckillModule {}
