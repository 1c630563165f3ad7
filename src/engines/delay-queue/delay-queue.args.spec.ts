import { encodePayload, processorSettings, timeArgs } from './delay-queue.args';
import { DelayQueueArgumentError } from './delay-queue.errors';
import { checkItemId, checkQueueName, MAX_DELAY_MS, MAX_PAYLOAD_BYTES } from './delay-queue.keys';

/** The error a call throws, for checking its field and status. */
function thrown(fn: () => unknown): DelayQueueArgumentError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DelayQueueArgumentError);
    return err as DelayQueueArgumentError;
  }
  throw new Error('expected a DelayQueueArgumentError');
}

describe('delay-queue arguments', () => {
  describe(timeArgs.name, () => {
    it('passes a delay to the script to count on the Redis clock', () => {
      expect(timeArgs({ delayMs: 0 })).toEqual(['delay', 0]);
      expect(timeArgs({ delayMs: 1500 })).toEqual(['delay', 1500]);
    });

    it('passes an absolute time as epoch ms, from a number or a Date', () => {
      expect(timeArgs({ dueAt: 1_795_302_000_000 })).toEqual(['at', 1_795_302_000_000]);
      expect(timeArgs({ dueAt: new Date(1_795_302_000_000) })).toEqual(['at', 1_795_302_000_000]);
    });

    it.each([-1, 1.5, NaN, Infinity, MAX_DELAY_MS + 1, '10' as unknown as number])('rejects delayMs %p naming the field', (d) => {
      const err = thrown(() => timeArgs({ delayMs: d }));
      expect(err.field).toBe('delayMs');
      expect(err.kind).toBe('invalid'); // a 400 (the filter's one mapping)
      expect(err.message).toMatch(/^delayMs /);
    });

    it.each([-1, 2.5, new Date('nope'), 9e15])('rejects dueAt %p', (t) => {
      expect(thrown(() => timeArgs({ dueAt: t })).field).toBe('dueAt');
    });

    it.each([undefined, null, {}, 5])('rejects a when that is neither form (%p)', (w) => {
      expect(thrown(() => timeArgs(w as never)).field).toBe('when');
    });
  });

  describe(encodePayload.name, () => {
    it('stores JSON', () => {
      expect(encodePayload({ orderId: 'o1', amount: 1200 })).toBe('{"orderId":"o1","amount":1200}');
      expect(encodePayload(null)).toBe('null');
    });

    it('accepts exactly the limit and rejects one byte more, counting UTF-8 bytes', () => {
      const fits = 'x'.repeat(MAX_PAYLOAD_BYTES - 2); // plus the two quotes
      expect(encodePayload(fits)).toHaveLength(MAX_PAYLOAD_BYTES);
      const err = thrown(() => encodePayload(fits + 'x'));
      expect(err.field).toBe('payload');
      expect(err.message).toContain(String(MAX_PAYLOAD_BYTES));
      // 3 bytes per character in UTF-8: far fewer characters fit.
      expect(thrown(() => encodePayload('支'.repeat(MAX_PAYLOAD_BYTES / 2))).field).toBe('payload');
    });

    it.each([undefined, () => 1, Symbol('s')])('rejects a payload that is not JSON (%p)', (p) => {
      expect(thrown(() => encodePayload(p)).field).toBe('payload');
    });

    it('rejects a payload that cannot be serialised (cycle, BigInt)', () => {
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      expect(thrown(() => encodePayload(cyclic)).field).toBe('payload');
      expect(thrown(() => encodePayload({ n: 1n })).field).toBe('payload');
    });
  });

  describe('names', () => {
    it.each(['close-reminder', 'a', 'orders.v2:eu_1', 'x'.repeat(64)])('accepts queue %p', (q) => expect(checkQueueName(q)).toBe(q));
    it.each(['', '-lead', 'has space', 'tag{x}', 'x'.repeat(65), 7])('rejects queue %p', (q) => {
      expect(thrown(() => checkQueueName(q)).field).toBe('queue');
    });
    it.each(['o1', 'order:2026:0001', '~!@#$%^&*()', 'x'.repeat(200)])('accepts id %p', (id) => expect(checkItemId(id)).toBe(id));
    it.each(['', ' ', 'a b', 'tab\there', 'é', 'x'.repeat(201), undefined])('rejects id %p', (id) => {
      expect(thrown(() => checkItemId(id)).field).toBe('id');
    });
  });

  describe(processorSettings.name, () => {
    it('fills in the defaults', () => {
      expect(processorSettings({}, 20_000)).toEqual({
        concurrency: 10,
        retry: { visibilityMs: 30_000, attempts: 5, backoff: { initialMs: 1000, maxMs: 300_000, factor: 2 } },
        pollMs: 1000,
        handlerTimeoutMs: 300_000,
        shutdownGraceMs: 10_000,
        claimBatch: 100,
        promoteBatch: 1000,
        replyWithinMs: 750,
      });
    });

    it('reads a claim reply for three quarters of the Redis command timeout', () => {
      expect(processorSettings({}, 20_000, 10_000).replyWithinMs).toBe(7500);
    });

    it("waits at shutdown for half the app's shutdown budget, and never longer than the visibility timeout", () => {
      expect(processorSettings({}, 10_000).shutdownGraceMs).toBe(5000);
      expect(processorSettings({ retry: { visibilityMs: 2000 } }, 20_000).shutdownGraceMs).toBe(2000);
    });

    it.each([
      [{ concurrency: 0 }, 'concurrency'],
      [{ concurrency: 1001 }, 'concurrency'],
      [{ retry: { visibilityMs: 999 } }, 'retry.visibilityMs'],
      [{ handlerTimeoutMs: 999 }, 'handlerTimeoutMs'],
      [{ retry: { attempts: 0 } }, 'retry.attempts'],
      [{ pollMs: 1001 }, 'pollMs'],
      [{ retry: { backoff: { initialMs: -1 } } }, 'retry.backoff.initialMs'],
      [{ retry: { backoff: { initialMs: 500, maxMs: 100 } } }, 'retry.backoff.maxMs'],
      [{ retry: { backoff: { factor: 0.5 } } }, 'retry.backoff.factor'],
      [{ retry: { backoff: { factor: NaN } } }, 'retry.backoff.factor'],
      [{ claimBatch: 0 }, 'claimBatch'],
      [{ claimBatch: 1001 }, 'claimBatch'],
      [{ promoteBatch: 9 }, 'promoteBatch'],
      [{ promoteBatch: 1001 }, 'promoteBatch'],
    ])('rejects %p naming %s', (opts, field) => {
      expect(thrown(() => processorSettings(opts, 10_000)).field).toBe(field);
    });
  });
});
