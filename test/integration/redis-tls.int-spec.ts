import { rmSync } from 'node:fs';
import { loadConfig } from '../../src/platform/config/load-config';
import { DIAGNOSTICS_KEYS } from '../../src/platform/diagnostics/diagnostics.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisService } from '../../src/platform/redis/redis.service';
import { MetricsService } from '../../src/platform/metrics/metrics.service';
import { ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { freePort } from '../harness/free-port';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { makeTlsFiles, TlsFiles } from '../harness/tls-certs';

describe('Redis over TLS with a password', () => {
  let tls: TlsFiles;
  let server: RedisServerHandle;
  let tlsPort: number;
  const password = 'tls-test-password-0123456789';

  beforeAll(async () => {
    tls = makeTlsFiles();
    tlsPort = await freePort();
    server = await startRedisServer({
      args: [
        '--tls-port',
        String(tlsPort),
        '--tls-cert-file',
        tls.cert,
        '--tls-key-file',
        tls.key,
        '--tls-ca-cert-file',
        tls.caCert,
        '--tls-auth-clients',
        'no',
        '--requirepass',
        password,
      ],
    });
  });
  afterAll(async () => {
    await server.destroy();
    rmSync(tls.dir, { recursive: true, force: true });
  });

  function connect(env: Record<string, string>) {
    const config = loadConfig({
      NODE_ENV: 'test',
      REDIS_KEY_PREFIX: randomPrefix(),
      REDIS_CONNECT_TIMEOUT_MS: '1000',
      REDIS_COMMAND_TIMEOUT_MS: '1000',
      ...env,
    });
    const metrics = new MetricsService();
    const redis = new RedisService(config, metrics);
    const scripts = new ScriptRegistry(redis);
    return { config, redis, scripts };
  }

  it('connects with rediss://, the configured CA and password, and runs scripts', async () => {
    const { config, redis, scripts } = connect({ REDIS_URL: `rediss://127.0.0.1:${tlsPort}`, REDIS_TLS_CA_FILE: tls.caCert, REDIS_PASSWORD: password });
    try {
      expect(config.redis.tls).toBe(true);
      await redis.warmUp();
      await scripts.loadAll();
      const key = new KeyBuilder(config).tagged(DIAGNOSTICS_KEYS, 'a', 'tls').key('visits', 'x');
      const [count] = await scripts.run<[number, number]>('diagnostics/touch', [key], [60_000]);
      expect(count).toBe(1);
    } finally {
      await redis.close();
    }
  });

  it('refuses a server whose certificate is not signed by the configured CA', async () => {
    const { redis } = connect({ REDIS_URL: `rediss://127.0.0.1:${tlsPort}`, REDIS_PASSWORD: password });
    try {
      await expect(redis.warmUp()).rejects.toThrow();
    } finally {
      await redis.close();
    }
  });

  it('refuses a wrong password', async () => {
    const { redis } = connect({ REDIS_URL: `rediss://127.0.0.1:${tlsPort}`, REDIS_TLS_CA_FILE: tls.caCert, REDIS_PASSWORD: 'wrong-password-wrong' });
    try {
      await expect(redis.warmUp()).rejects.toThrow();
      expect(redis.isConnected).toBe(false);
    } finally {
      await redis.close();
    }
  });
});
