/**
 * The orders module's public file: what other features may use. Anything not
 * exported here is the module's own (lint: feature-through-public-file).
 */
export { OrdersModule } from './orders.module';
export { OrdersService } from './orders.service';
export { OrderConflictError, type OrderConflictCode } from './order.errors';
export { ORDER_EVENTS, OrderEventsService } from './order-events.service';
export type { OrderEvent } from './order.events';
export type { OrderSummary, OrderView } from './order.views';
export { orderLockName } from './order-locks';
export { EXAMPLE_ORDER_ID } from './orders-api.decorators';
export { OrderIdParamDto } from './dto/params.dto';
export { type PendingOrderSource, PendingOrders } from './pending-orders';
export { newOrderId } from './order.keys';
