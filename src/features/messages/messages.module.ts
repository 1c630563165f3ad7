import { Module } from '@nestjs/common';
import { BroadcastFeed } from './broadcast-feed';
import { MessagesAdminController } from './messages-admin.controller';
import { MessagesIngestController } from './messages-ingest.controller';
import { messagesConfig } from './messages.config';
import { MessagesController } from './messages.controller';
import { MessagesMetrics } from './messages.metrics';
import { MessagesService } from './messages.service';
import { MessagesStore } from './messages.store';
import { PendingActionsService } from './pending-actions.service';

/** The app message center: writes, pulls, read state, broadcasts, reminders for unfinished actions. */
@Module({
  controllers: [MessagesController, MessagesIngestController, MessagesAdminController],
  providers: [messagesConfig.provider, MessagesStore, MessagesService, BroadcastFeed, MessagesMetrics, PendingActionsService],
  // The in-process API (plain commands, see message.commands.ts) for the modules that write messages.
  exports: [MessagesService, PendingActionsService],
})
export class MessagesModule {}
