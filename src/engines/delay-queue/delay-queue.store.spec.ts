import type { AppConfig } from '../../platform/config/app-config';
import { KeyBuilder } from '../../platform/redis/key-builder';
import type { RedisService } from '../../platform/redis/redis.service';
import type { ScriptRegistry } from '../../platform/scripts/script-registry.service';
import { DelayQueueArgumentError } from './delay-queue.errors';
import { queueKeys } from './delay-queue.keys';
import { DelayQueueStore } from './delay-queue.store';

/** The store against a registry that records each call and answers with the reply the test gives. */
function storeAnswering(reply: unknown) {
  const calls: Array<{ id: string; keys: readonly string[]; args: readonly unknown[] }> = [];
  const scripts = {
    run: (id: string, keys: readonly string[], args: readonly unknown[] = []) => {
      calls.push({ id, keys, args });
      return Promise.resolve(reply);
    },
  } as unknown as ScriptRegistry;
  const keyBuilder = new KeyBuilder({ redis: { keyPrefix: 'rp' } } as AppConfig);
  const store = new DelayQueueStore(scripts, {} as RedisService, keyBuilder);
  return { store, calls, k: store.keys('q1'), expected: queueKeys(keyBuilder, 'q1') };
}

describe(DelayQueueStore.name, () => {
  it("builds a queue's keys with the key builder, once, and rejects a bad queue name naming the field", () => {
    const { store, k, expected } = storeAnswering(null);
    expect(k).toEqual(expected);
    expect(store.keys('q1')).toBe(k);
    expect(() => store.keys('bad name')).toThrow(DelayQueueArgumentError);
  });

  it('decodes a claim reply: header, next wake-up, one delivery per five fields, then one dead item per three', async () => {
    const { store, calls, k } = storeAnswering([
      1000,
      '1500',
      3,
      4,
      1,
      2,
      'a',
      '{"x":1}',
      1,
      '900',
      1_000_000_001,
      'b',
      'null',
      2,
      '950',
      1_000_000_002,
      'c',
      5,
      'visibility timeout',
      'd',
      0,
      'payload missing',
    ]);
    expect(await store.claim(k, 2, 30_000, 5, 1000)).toEqual({
      now: 1000,
      nextWake: 1500,
      readyLeft: 3,
      promoted: 4,
      requeued: 1,
      died: 2,
      claimed: [
        { id: 'a', rawPayload: '{"x":1}', attempt: 1, dueAt: 900, token: 1_000_000_001 },
        { id: 'b', rawPayload: 'null', attempt: 2, dueAt: 950, token: 1_000_000_002 },
      ],
      dead: [
        { id: 'c', attempts: 5, lastError: 'visibility timeout' },
        { id: 'd', attempts: 0, lastError: 'payload missing' },
      ],
    });
    expect(calls).toEqual([{ id: 'delay-queue/claim', keys: k.keys, args: [2, 30_000, 5, 1000, k.channel, '', '1'] }]);
  });

  it('passes the time after which the caller no longer reads the reply, in whole ms', async () => {
    const { store, calls, k } = storeAnswering([1000, '', 0, 0, 0, 0]);
    await store.claim(k, 1, 30_000, 5, 1000, 1_700_000_000_750.5);
    expect(calls[0].args).toEqual([1, 30_000, 5, 1000, k.channel, 1_700_000_000_750, '1']);
  });

  it("reads '' as no next wake-up", async () => {
    const { store, k } = storeAnswering([1000, '', 0, 0, 0, 0]);
    expect(await store.claim(k, 0, 30_000, 5, 1000)).toMatchObject({ nextWake: null, claimed: [] });
  });

  it.each([
    [1, 'retried'],
    [2, 'dead'],
    [0, 'stale'],
  ])('names fail outcome %d %s', async (code, outcome) => {
    const { store, calls, k } = storeAnswering(code);
    expect(await store.fail(k, 'a', 7, 5, 2000, 'Error: boom')).toBe(outcome);
    expect(calls[0]).toEqual({ id: 'delay-queue/fail', keys: k.keys, args: ['a', 7, 5, 2000, 'Error: boom', 'fail', k.channel] });
  });

  it('releases through fail in release mode, and only reply 3 counts as released', async () => {
    const released = storeAnswering(3);
    expect(await released.store.release(released.k, 'a', 7, 5)).toBe(true);
    expect(released.calls[0].args).toEqual(['a', 7, 5, 0, 'released at shutdown', 'release', released.k.channel]);
    const stale = storeAnswering(0);
    expect(await stale.store.release(stale.k, 'a', 7, 5)).toBe(false);
  });

  it('decodes schedule, cancel and get replies into item states', async () => {
    const s = storeAnswering([0, 3, '1234']);
    expect(await s.store.schedule(s.k, 'a', 'at', 1234, '"p"', 'keep')).toEqual({ written: false, existed: 'in-flight', dueAt: 1234 });
    expect(s.calls[0].args).toEqual(['a', 'at', 1234, '"p"', 'keep', s.k.channel]);
    const c = storeAnswering([4, 2]);
    expect(await c.store.cancel(c.k, 'a')).toEqual({ state: 'dead', attempts: 2 });
    const g = storeAnswering([2, '1234', '"p"', '1', '']);
    expect(await g.store.get(g.k, 'a')).toEqual({ state: 'ready', at: 1234, rawPayload: '"p"', attempts: 1 });
    const e = storeAnswering([4, '99', '"p"', '3', 'Error: x']);
    expect(await e.store.get(e.k, 'a')).toMatchObject({ state: 'dead', lastError: 'Error: x' });
    const none = storeAnswering([0]);
    expect(await none.store.get(none.k, 'a')).toBeNull();
  });

  it('reads stats on the four state keys only, empty heads as null', async () => {
    const { store, calls, k } = storeAnswering([5000, 1, 2, 3, 4, '', '4000']);
    expect(await store.stats(k)).toEqual({ now: 5000, pending: 1, ready: 2, inFlight: 3, dead: 4, pendingHead: null, readyHead: 4000 });
    expect(calls[0]).toEqual({ id: 'delay-queue/stats', keys: k.stateKeys, args: [] });
  });

  it('decodes a dead-letter page, an empty payload as null', async () => {
    const { store, k } = storeAnswering([7, 'a', '{"n":1}', '3', 'Error: x', '100', 'b', '', '1', '', '90']);
    expect(await store.deadPage(k, 0, 2)).toEqual({
      total: 7,
      items: [
        { id: 'a', payload: { n: 1 }, attempts: 3, lastError: 'Error: x', diedAt: 100 },
        { id: 'b', payload: null, attempts: 1, lastError: '', diedAt: 90 },
      ],
    });
  });

  it('turns extend replies into booleans', async () => {
    const yes = storeAnswering(1);
    expect(await yes.store.extend(yes.k, 'a', 7, 3000)).toBe(true);
    expect(yes.calls[0].args).toEqual(['a', 7, 3000]);
    const no = storeAnswering(0);
    expect(await no.store.extend(no.k, 'a', 7, 3000)).toBe(false);
  });

  it('sends the acks of one event-loop turn as one call, and gives each caller its own answer', async () => {
    const s = storeAnswering([1, 0, 1]);
    const answers = await Promise.all([s.store.ack(s.k, 'a', 7), s.store.ack(s.k, 'b', 8), s.store.ack(s.k, 'c', 9)]);
    expect(answers).toEqual([true, false, true]);
    expect(s.calls).toEqual([{ id: 'delay-queue/ack', keys: s.k.keys, args: ['a', 7, 'b', 8, 'c', 9] }]);
    // The next turn starts a new call.
    expect(await s.store.ack(s.k, 'd', 10)).toBe(true);
    expect(s.calls).toHaveLength(2);
  });

  it('hands a failed ack call’s error to every caller of that turn', async () => {
    const calls: unknown[] = [];
    const scripts = {
      run: (...a: unknown[]) => {
        calls.push(a);
        return Promise.reject(new Error('redis down'));
      },
    } as unknown as ScriptRegistry;
    const store = new DelayQueueStore(scripts, {} as RedisService, new KeyBuilder({ redis: { keyPrefix: 'rp' } } as AppConfig));
    const k = store.keys('q1');
    const results = await Promise.allSettled([store.ack(k, 'a', 1), store.ack(k, 'b', 2)]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(calls).toHaveLength(1);
  });
});
