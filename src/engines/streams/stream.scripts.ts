import type { ScriptRegistry } from '../../platform/scripts/script-registry.service';

/** What lua/engines/streams/fail-2.lua did with a failed delivery. */
export interface FailureRecord {
  /** True when the entry was moved to the dead-letter stream and acked; false when it stays pending. */
  deadLettered: boolean;
  /** Deliveries of the entry so far (0: it was no longer pending). */
  deliveries: number;
}

export interface FailureArgs {
  stream: string;
  deadLetterStream: string;
  group: string;
  consumer: string;
  id: string;
  maxDeliveries: number;
  deadLetterMaxLen: number;
  error: string;
}

/** The one wrapper of lua/engines/streams/fail-2.lua: records a failed delivery, dead-lettering the entry on its last one. */
export async function recordFailure(scripts: ScriptRegistry, a: FailureArgs): Promise<FailureRecord> {
  const [dead, deliveries] = await scripts.run<[number, number]>(
    'streams/fail',
    [a.stream, a.deadLetterStream],
    [a.group, a.id, a.maxDeliveries, a.deadLetterMaxLen, a.consumer, a.error],
  );
  return { deadLettered: dead === 1, deliveries };
}
