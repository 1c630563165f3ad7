import { Module } from '@nestjs/common';
import { LocksModule } from '../../engines/locks/locks.module';
import { ChannelGateway } from './channels/channel-gateway';
import { ChannelLedger } from './channels/channel-ledger';
import { ChannelsAdminController } from './channels-admin.controller';
import { MerchantOrdersController } from './merchant-orders.controller';
import { ORDER_LOCK_POLICIES } from './order-lock-policies';
import { OrderEventsService } from './order-events.service';
import { ordersConfig } from './orders.config';
import { OrdersMetrics } from './orders.metrics';
import { OrdersService } from './orders.service';
import { OrdersStore } from './orders.store';
import { PaymentPlansService } from './payment-plans.service';
import { PendingOrders } from './pending-orders';
import { PaymentRunner } from './payment-runner.service';
import { PaymentsController } from './payments.controller';
import { StreamsModule } from '../../engines/streams/streams.module';
import { WalletModule } from '../wallet';
import { WalletChannel } from './channels/wallet-channel';

/** Master orders, payment plans and their execution over the payment channels, and the order events. */
@Module({
  imports: [LocksModule.forFeature('orders', ORDER_LOCK_POLICIES), StreamsModule, WalletModule],
  controllers: [MerchantOrdersController, PaymentsController, ChannelsAdminController],
  providers: [
    ordersConfig.provider,
    OrdersStore,
    OrdersService,
    PaymentPlansService,
    PaymentRunner,
    ChannelGateway,
    ChannelLedger,
    WalletChannel,
    OrdersMetrics,
    OrderEventsService,
    PendingOrders,
  ],
  exports: [OrdersService, OrderEventsService, PendingOrders],
})
export class OrdersModule {}
