/**
 * The red-envelope module's public file: what other features may use (the module, for
 * the application root) and the key layout a same-work baseline needs (the
 * benchmarks' floor servers). Anything not exported here is the module's own
 * (lint: feature-through-public-file).
 */
export { RedEnvelopeModule } from './red-envelope.module';
export { activityKey, poolKeys } from './red-envelope.keys';
export { memoOf } from './red-envelope-activity.command';
export type { ActivityRecord as RainRecord } from './red-envelope.types';
