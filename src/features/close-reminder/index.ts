/**
 * The close-reminder module's public file: what other features may use (today only the
 * module, for the application root). Anything not exported here is the module's
 * own (lint: feature-through-public-file).
 */
export { CloseReminderModule } from './close-reminder.module';
