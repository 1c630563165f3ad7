/**
 * The lock engine's public file: the module, the service other modules inject, its settings
 * slice, and the types and errors of its calls. Inside src/engines/locks files import each other directly.
 */
export { LocksModule } from './locks.module';
export { LockService } from './lock.service';
export { locksConfig } from './locks.config';
export { LockContendedError, LockLostError } from './lock.errors';
export type { AcquireOptions, LockHandle } from './lock.types';
