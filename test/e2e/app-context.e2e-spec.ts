import { appContext, loadConfig, MessagesService } from '../../src/create-app';
import { BackgroundWorkers } from '../../src/engines/workers/background-workers.service';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';

/**
 * appContext, the build's entry for a client in the same process (the benchmarks' baseline servers): the modules
 * without HTTP, their background workers running or stopped as asked. A worker registered after a stop is stopped at
 * once, so a fresh one shows which it is.
 */
describe('appContext (create-app)', () => {
  let redis: RedisServerHandle;
  beforeAll(async () => (redis = await startRedisServer()));
  afterAll(async () => redis?.destroy());

  const config = () => loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', REDIS_URL: redis.url, REDIS_KEY_PREFIX: randomPrefix() });
  /** Whether a worker registered now is stopped at once (the context's workers were stopped). */
  const stoppedAtOnce = (workers: BackgroundWorkers) => {
    const stop = jest.fn(() => Promise.resolve());
    workers.register(`probe-${Math.random()}`, { stop });
    return stop.mock.calls.length === 1;
  };

  it('with workers: false, stops every background worker and still serves the modules', async () => {
    const ctx = await appContext(config(), { workers: false });
    try {
      expect(stoppedAtOnce(ctx.get(BackgroundWorkers))).toBe(true);
      expect(ctx.get(BackgroundWorkers).names.length).toBeGreaterThan(1);
      expect(typeof ctx.get(MessagesService).write).toBe('function');
    } finally {
      await ctx.close();
    }
  });

  it('with workers: true, leaves them running', async () => {
    const ctx = await appContext(config(), { workers: true });
    try {
      expect(stoppedAtOnce(ctx.get(BackgroundWorkers))).toBe(false);
    } finally {
      await ctx.close();
    }
  });
});
