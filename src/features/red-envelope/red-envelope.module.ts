import { Module } from '@nestjs/common';
import { LocksModule } from '../../engines/locks/locks.module';
import { StreamsModule } from '../../engines/streams/streams.module';
import { WalletModule } from '../wallet';
import { RedEnvelopeActivities } from './red-envelope-activities.service';
import { CreditingService } from './crediting.service';
import { GrabService } from './grab.service';
import { RainStalls } from './rain-stalls';
import { RedEnvelopeAdminController } from './red-envelope-admin.controller';
import { RedEnvelopeController } from './red-envelope.controller';
import { redEnvelopeConfig } from './red-envelope.config';
import { RedEnvelopeMetrics } from './red-envelope.metrics';
import { RedEnvelopeStore } from './red-envelope.store';

/** Red-envelope rains: pre-split envelopes grabbed at most once per user, each credited to a wallet exactly once. */
@Module({
  imports: [WalletModule, StreamsModule, LocksModule.forFeature('red-envelope', { 'red-envelope-load': { leaseMs: 30_000, waitMs: 0 } })],
  controllers: [RedEnvelopeController, RedEnvelopeAdminController],
  providers: [redEnvelopeConfig.provider, RedEnvelopeStore, RedEnvelopeMetrics, RainStalls, CreditingService, RedEnvelopeActivities, GrabService],
})
export class RedEnvelopeModule {}
