/**
 * The messages module's public file: what other features may use. Anything not
 * exported here is the module's own (lint: feature-through-public-file).
 */
export { MessagesModule } from './messages.module';
export { MessagesService } from './messages.service';
export { CLOSE_REMINDER_BIZ_TYPE } from './dto/write-message.dto';
