import { Module } from '@nestjs/common';
import { MessagesModule } from '../messages';
import { OrdersModule } from '../orders';
import { CloseReminderAdminController } from './close-reminder-admin.controller';
import { CloseReminderStatus } from './close-reminder.status';
import { closeReminderConfig } from './close-reminder.config';
import { CloseReminderMetrics } from './close-reminder.metrics';
import { CloseReminderService } from './close-reminder.service';
import { CloseReminderStore } from './close-reminder.store';
import { MerchantCloseReminderController } from './merchant-close-reminder.controller';
import { MerchantSettings } from './merchant-settings';

/** Close reminders: the payer of an unpaid order hears from the app before the order closes, for the merchants that opt in. */
@Module({
  imports: [OrdersModule, MessagesModule],
  controllers: [CloseReminderAdminController, MerchantCloseReminderController],
  providers: [closeReminderConfig.provider, CloseReminderStore, MerchantSettings, CloseReminderService, CloseReminderStatus, CloseReminderMetrics],
})
export class CloseReminderModule {}
