import { loadConfig } from '../../src/config/load-config';
import { MetricsService } from '../../src/metrics/metrics.service';
import { RedisUnavailableError } from '../../src/redis/redis-unavailable.error';
import { RedisService } from '../../src/redis/redis.service';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';

const TIMEOUT_MS = 300;

/** How long `p` took to settle, and how. */
async function timed(p: Promise<unknown>): Promise<{ ms: number; err?: unknown }> {
  const t0 = Date.now();
  try {
    await p;
    return { ms: Date.now() - t0 };
  } catch (err) {
    return { ms: Date.now() - t0, err };
  }
}

describe('command deadlines of the command connection', () => {
  let server: RedisServerHandle;
  let redis: RedisService;
  beforeAll(async () => {
    server = await startRedisServer();
    const config = loadConfig({ NODE_ENV: 'test', REDIS_URL: server.url, REDIS_KEY_PREFIX: randomPrefix(), REDIS_COMMAND_TIMEOUT_MS: String(TIMEOUT_MS) });
    redis = new RedisService(config, new MetricsService());
    await redis.warmUp();
  });
  afterAll(async () => {
    await redis.close();
    await server.destroy();
  });

  it('sets no timer per command: ioredis’s own command timeout is off on the command connection', () => {
    expect((redis.client as unknown as { options: { commandTimeout?: number } }).options.commandTimeout).toBeUndefined();
  });

  it('answers every command of a burst that Redis answers, none failed by the watch', async () => {
    const replies = await Promise.all(Array.from({ length: 5000 }, (_, i) => redis.command((c) => c.echo(String(i)))));
    expect(replies.every((r, i) => r === String(i))).toBe(true);
  });

  it('fails each command Redis does not answer with a 503 once its own timeout has passed, not before, and serves again once Redis is back', async () => {
    process.kill(server.pid!, 'SIGSTOP');
    try {
      const first = timed(redis.command((c) => c.get('k1')));
      await new Promise((r) => setTimeout(r, TIMEOUT_MS / 2));
      const second = timed(redis.command((c) => c.get('k2')));
      const [a, b] = await Promise.all([first, second]);
      for (const r of [a, b]) {
        expect(r.err).toBeInstanceOf(RedisUnavailableError);
        expect(r.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
        expect(r.ms).toBeLessThan(TIMEOUT_MS * 1.1 + 100);
      }
    } finally {
      process.kill(server.pid!, 'SIGCONT');
    }
    await expect(redis.command((c) => c.echo('back'))).resolves.toBe('back');
  });
});
