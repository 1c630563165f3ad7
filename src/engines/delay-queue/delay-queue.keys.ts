import { defineKeySpace, KeyBuilder } from '../../platform/redis/key-builder';
import { DelayQueueArgumentError } from './delay-queue.errors';

/** Queue names: what the key tag allows, short and readable in keys and metric labels. */
export const QUEUE_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;
/** Item ids: 1-200 visible characters, no whitespace. */
export const ITEM_ID_RE = /^[\x21-\x7e]{1,200}$/;
/** Largest payload, as stored (JSON), in bytes. */
export const MAX_PAYLOAD_BYTES = 16 * 1024;
/** Longest delay: ten years. */
export const MAX_DELAY_MS = 10 * 365 * 24 * 3600 * 1000;

/** The nine keys every queue script takes (in this order) and the queue's event channel. */
export interface QueueKeys {
  keys: readonly string[];
  /** pending, ready, in-flight, dead: what the stats script reads. */
  stateKeys: readonly string[];
  channel: string;
}

/** The delay queues' keys: one queue (`{q:<queue>}`); the registry of queue names (`{reg}`). */
export const DELAY_QUEUE_KEYS = defineKeySpace('delay-queue', { q: 'id', reg: 'fixed' });
const PARTS = ['pending', 'ready', 'inflight', 'dead', 'payload', 'attempts', 'errors', 'lease', 'seq'] as const;

export function checkQueueName(queue: unknown): string {
  if (typeof queue !== 'string' || !QUEUE_NAME_RE.test(queue)) {
    throw new DelayQueueArgumentError('queue', 'must be 1-64 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit');
  }
  return queue;
}

export function checkItemId(id: unknown): string {
  if (typeof id !== 'string' || !ITEM_ID_RE.test(id)) {
    throw new DelayQueueArgumentError('id', 'must be 1-200 printable ASCII characters without spaces');
  }
  return id;
}

/** Every key of one queue shares the queue's hash tag `{q:<queue>}`, so each script touches one cluster slot. */
export function queueKeys(builder: KeyBuilder, queue: string): QueueKeys {
  const tagged = builder.tagged(DELAY_QUEUE_KEYS, 'q', checkQueueName(queue));
  const keys = PARTS.map((p) => tagged.key(p));
  return { keys, stateKeys: keys.slice(0, 4), channel: tagged.key('events') };
}

/** The set of known queue names (for the admin list). Its own key under the fixed tag `{reg}`, outside any queue's slot. */
export function registryKey(builder: KeyBuilder): string {
  return builder.tagged(DELAY_QUEUE_KEYS, 'reg').key('queues');
}
