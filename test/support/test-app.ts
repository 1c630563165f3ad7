import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { randomBytes } from 'node:crypto';
import { sign } from 'jsonwebtoken';
import { AppConfig } from '../../src/platform/config/app-config';
import { loadConfig } from '../../src/platform/config/load-config';
import { createApp } from '../../src/create-app';
import { signRequest } from '../../src/platform/auth/merchant-signature';
import Redis from 'ioredis';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';

/** Test credentials, configured on every test app. */
export const CREDS = {
  jwtSecret: 'test-jwt-secret-0123456789abcdef0123456789',
  merchantId: 'm_test',
  merchantSecret: 'test-merchant-secret-0123456789',
  otherMerchantId: 'm_other',
  otherMerchantSecret: 'other-merchant-secret-0123456789',
  serviceName: 'billing',
  serviceToken: 'test-service-token-0123456789',
  adminName: 'ops',
  adminKey: 'test-admin-key-0123456789abc',
};

export interface TestApp {
  app: NestFastifyApplication;
  config: AppConfig;
  /** The Node HTTP server, for supertest. */
  server: ReturnType<NestFastifyApplication['getHttpServer']>;
  close(): Promise<void>;
}

/**
 * The whole application on Fastify against a harness Redis, with test credentials and a random key prefix, listening
 * on a loopback port until close(). Left to SuperTest, a server that is not listening is opened for the requests in
 * flight and closed after the last one, and under hundreds of concurrent requests that close raced the keep-alive
 * sockets of the next ones: a reset request, then a close waiting on a connection that never ended, and every later
 * request of the suite waiting for that close.
 */
export async function startTestApp(redisUrl: string, env: Record<string, string> = {}): Promise<TestApp> {
  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    REDIS_URL: redisUrl,
    REDIS_KEY_PREFIX: randomPrefix(),
    REDIS_COMMAND_TIMEOUT_MS: '500',
    JWT_SECRET: CREDS.jwtSecret,
    MERCHANT_SECRETS: `${CREDS.merchantId}:${CREDS.merchantSecret},${CREDS.otherMerchantId}:${CREDS.otherMerchantSecret}`,
    SERVICE_TOKENS: `${CREDS.serviceName}:${CREDS.serviceToken}`,
    ADMIN_API_KEYS: `${CREDS.adminName}:${CREDS.adminKey}`,
    SWAGGER_ENABLED: 'true',
    // The orders suites force every outcome of the balance leg through the simulated channel; wallet suites pass 'wallet'.
    BALANCE_CHANNEL: 'simulated',
    ...env,
  });
  const app = await createApp(config);
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, config, server: app.getHttpServer(), close: () => app.close() };
}

/** A signed app-user token (HS256 with the test secret). */
export function userToken(sub: string, opts: { expiresInS?: number; secret?: string; claims?: Record<string, unknown> } = {}): string {
  return sign({ sub, ...opts.claims }, opts.secret ?? CREDS.jwtSecret, { algorithm: 'HS256', expiresIn: opts.expiresInS ?? 3600 });
}

/** Headers of a correctly signed merchant request. */
export function merchantHeaders(
  method: string,
  path: string,
  body: string,
  opts: { merchantId?: string; secret?: string; timestamp?: number; nonce?: string } = {},
): Record<string, string> {
  const timestamp = String(opts.timestamp ?? Date.now());
  const nonce = opts.nonce ?? randomBytes(16).toString('hex');
  const secret = opts.secret ?? CREDS.merchantSecret;
  return {
    'x-merchant-id': opts.merchantId ?? CREDS.merchantId,
    'x-timestamp': timestamp,
    'x-nonce': nonce,
    'x-signature': signRequest(secret, { method, path, timestamp, nonce, body }),
    ...(body ? { 'content-type': 'application/json' } : {}),
  };
}

/** What an end-to-end suite works with: its own redis-server, the app on it, and a plain connection for checks. */
export interface AppOnOwnRedis {
  redis: RedisServerHandle;
  t: TestApp;
  raw: Redis;
}

/**
 * Registers the hooks of a suite that runs the app on a redis-server of its own: both started before all tests,
 * stopped after all. The returned object is filled in by that `beforeAll`.
 */
export function useAppOnOwnRedis(env: Record<string, string> = {}): AppOnOwnRedis {
  const handles = {} as AppOnOwnRedis;
  beforeAll(async () => {
    handles.redis = await startRedisServer();
    handles.t = await startTestApp(handles.redis.url, env);
    handles.raw = new Redis(handles.redis.url);
  });
  afterAll(async () => {
    handles.raw?.disconnect();
    await handles.t?.close();
    await handles.redis?.destroy();
  });
  return handles;
}
