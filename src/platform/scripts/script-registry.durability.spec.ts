import { loadConfig } from '../config/load-config';
import { MetricsService } from '../metrics/metrics.service';
import type { RedisService } from '../redis/redis.service';
import { ScriptRegistry } from './script-registry.service';
import { WriteUnconfirmedError } from './write-unconfirmed.error';

/** A registry on a stand-in connection that records every command; WAIT answers `acked` replicas. */
function rig(env: Record<string, string>, acked = 1) {
  const sent: unknown[][] = [];
  const client = {
    on: () => undefined,
    evalsha: (...args: unknown[]) => (sent.push(['evalsha', args[0]]), Promise.resolve([0, 1, 0, 0])),
    wait: (...args: unknown[]) => (sent.push(['wait', ...args]), Promise.resolve(acked)),
  };
  const metrics = new MetricsService();
  const config = loadConfig({ NODE_ENV: 'test', ...env });
  const redis = { client, config, metrics, failure: (e: unknown) => e } as unknown as RedisService;
  return { registry: new ScriptRegistry(redis), sent, metrics };
}

const orderKeys = ['o', 'p', 'e', 'i'];
const commands = (sent: unknown[][]) => sent.map((c) => c[0]);

describe(`${ScriptRegistry.name} and durable scripts`, () => {
  it('sends no WAIT with DURABILITY_REPLICAS=0 (the default)', async () => {
    const { registry, sent } = rig({});
    await registry.run('orders/write', orderKeys, []);
    expect(commands(sent)).toEqual(['evalsha']);
  });

  it('sends WAIT <replicas> <timeout> after a durable script, on the same connection', async () => {
    const { registry, sent } = rig({ DURABILITY_REPLICAS: '1', DURABILITY_TIMEOUT_MS: '300' });
    await expect(registry.run('orders/write', orderKeys, [])).resolves.toEqual([0, 1, 0, 0]);
    expect(sent).toEqual([
      ['evalsha', registry.get('orders/write').sha],
      ['wait', 1, 300],
    ]);
  });

  it('sends no WAIT after a script that is not durable', async () => {
    const { registry, sent } = rig({ DURABILITY_REPLICAS: '1' });
    await registry.run('orders/read', ['o', 'p'], []);
    expect(commands(sent)).toEqual(['evalsha']);
  });

  it('uses the messages setting for the message writes', async () => {
    const { registry, sent } = rig({ DURABILITY_REPLICAS: '1', DURABILITY_MESSAGES_REPLICAS: '0' });
    await registry.run('messages/broadcast', ['a', 'b', 'c'], []);
    await registry.run('orders/write', orderKeys, []);
    expect(commands(sent)).toEqual(['evalsha', 'evalsha', 'wait']);
  });

  it('answers WRITE_UNCONFIRMED (503 with Retry-After) when fewer replicas confirm, and counts it by script', async () => {
    const { registry, metrics } = rig({ DURABILITY_REPLICAS: '2', REDIS_RETRY_AFTER_S: '2' }, 1);
    const err = await registry.run('orders/write', orderKeys, []).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WriteUnconfirmedError);
    expect(err).toMatchObject({ kind: 'unavailable', code: 'WRITE_UNCONFIRMED', retryAfterMs: 2000, details: { replicasWanted: 2, replicasConfirmed: 1 } });
    expect(await metrics.render().then((m) => m.body)).toMatch(/durability_unconfirmed_writes_total\{script="orders\/write"\} 1/);
  });

  it('asks one WAIT for every durable reply that arrives while it is out', async () => {
    const { registry, sent } = rig({ DURABILITY_REPLICAS: '1' });
    await Promise.all([1, 2, 3].map(() => registry.run('orders/write', orderKeys, [])));
    expect(commands(sent)).toEqual(['evalsha', 'evalsha', 'evalsha', 'wait']);
  });
});
