import type { Type } from '@nestjs/common';
import type { Backoff } from './retry-policy';

/**
 * Background work is declared on the provider method that handles it, with one of the decorators below, and found
 * at boot by the WorkerRegistry (Nest's discovery), which starts it, stops it on shutdown and lists it (the table in
 * docs/background-work.md is kept equal to that list by a test). Two declarations of one worker, or one for an
 * engine the app does not have, stop the boot.
 */

/** Reads a provider of the app at boot (a feature's config slice, its key builder). */
export type Resolve = <T>(token: Type<T>) => T;

/** A value read from the app's settings at boot, with the setting that sets it (shown in the background-work table). */
export interface Configured<T> {
  readonly setting: string;
  readonly value: (get: Resolve) => T;
}

/** A declared value: fixed in code, or set by a setting. */
export type Setting<T> = T | Configured<T>;

/** A value set by the setting `setting` (an environment variable), read from the app's providers at boot. */
export const configured = <T>(setting: string, value: (get: Resolve) => T): Configured<T> => ({ setting, value });

export const isConfigured = <T>(v: Setting<T>): v is Configured<T> => typeof v === 'object' && v !== null && 'setting' in v && 'value' in v;

/** A retry policy as declared (see RetryPolicy): fields left out take the engine's defaults. */
export interface RetryDeclaration {
  attempts?: Setting<number>;
  backoff?: { initialMs?: Setting<number>; maxMs?: Setting<number>; factor?: Backoff['factor'] };
  visibilityMs?: Setting<number>;
}

interface DeclarationBase {
  retry?: RetryDeclaration;
  /** The engine's other options (concurrency, batch sizes), read at boot. */
  options?: (get: Resolve) => Record<string, unknown>;
  /** The feature's own metric of this work, shown next to the engine's in the table. */
  metric?: string;
}

/** The handler of a delay queue: each due item is handed to the method (a `Delivery`). */
export interface DelayQueueHandlerSpec extends DeclarationBase {
  queue: string;
}

/** A consumer group on a stream source (its owner registers the source with the registry): each entry is handed to the method. */
export interface StreamConsumerSpec extends DeclarationBase {
  /** The stream source, e.g. `order-events`. */
  stream: string;
  group: string;
  /**
   * Started by its feature, one runner per entity (the source names what), rather than once at boot: the registry
   * lists it, checks it is declared once and gives its feature the resolved policy (`WorkerRegistry.declared`).
   */
  startedPer?: string;
}

/** Lease of a periodic job: one instance at a time runs it (SET NX PX on `key`), else every instance does. */
export interface LeaseSpec {
  key: (get: Resolve) => string;
  /** The key as shown in the table, e.g. `seckill:{i}:sweep`. */
  shown: string;
  /** How long a taken lease holds, ms. Default: the period less 50 ms (at least 100). */
  ttlMs?: number;
}

/** Work run on a timer by every instance, or by one at a time under a lease. The method is handed an AbortSignal that aborts on shutdown. */
export interface PeriodicJobSpec {
  name: string;
  everyMs: Setting<number>;
  lease?: LeaseSpec;
  /** Runs once at boot (not awaited), then every `everyMs`. Default false: first after `everyMs`. */
  runAtStart?: boolean;
  /** A run that fails is run again after this backoff (at most the period) instead of a whole period later. */
  backoff?: { initialMs: number; maxMs: number };
  /** The feature's own metric of this work. */
  metric?: string;
  /** Delay queues this job drains (a former queue no processor consumes any more): they count as handled. */
  drains?: string[];
}

export type WorkerKind = 'delay-queue' | 'stream-consumer' | 'periodic';

/** One declaration, as the decorator stores it on its method. */
export type WorkerSpec =
  { kind: 'delay-queue'; spec: DelayQueueHandlerSpec } | { kind: 'stream-consumer'; spec: StreamConsumerSpec } | { kind: 'periodic'; spec: PeriodicJobSpec };

/** The metadata key of the declarations on a method. */
export const WORKER_METADATA = 'redis-pay:worker';

/**
 * Stored on the class's prototype under the method's name, not on the function: a test that replaces the method
 * (jest.spyOn) before boot still has it declared, and the registry calls the method as it is when work arrives.
 */
function declare(decl: WorkerSpec): MethodDecorator {
  return (target, key, descriptor) => {
    const all = (Reflect.getOwnMetadata(WORKER_METADATA, target, key) as WorkerSpec[] | undefined) ?? [];
    Reflect.defineMetadata(WORKER_METADATA, [...all, decl], target, key);
    return descriptor;
  };
}

/** The declarations on method `key` of `prototype` (or of a class it extends). */
export const declarationsOf = (prototype: object, key: string): WorkerSpec[] =>
  (Reflect.getMetadata(WORKER_METADATA, prototype, key) as WorkerSpec[] | undefined) ?? [];

/** Declares the method as the handler of delay queue `spec.queue`. */
export const DelayQueueHandler = (spec: DelayQueueHandlerSpec): MethodDecorator => declare({ kind: 'delay-queue', spec });

/** Declares the method as the consumer group `spec.group` of stream source `spec.stream`. */
export const StreamConsumer = (spec: StreamConsumerSpec): MethodDecorator => declare({ kind: 'stream-consumer', spec });

/** Declares the method as a periodic job. */
export const PeriodicJob = (spec: PeriodicJobSpec): MethodDecorator => declare({ kind: 'periodic', spec });

/** The unique name of a declaration: `delay-queue:<queue>`, `stream:<source>:<group>`, or the job's name. */
export function workerName(d: WorkerSpec): string {
  switch (d.kind) {
    case 'delay-queue':
      return `delay-queue:${d.spec.queue}`;
    case 'stream-consumer':
      return `stream:${d.spec.stream}:${d.spec.group}`;
    case 'periodic':
      return d.spec.name;
  }
}
