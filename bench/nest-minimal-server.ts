/**
 * The "nest-minimal" row of the http-floor benchmark: the floor's work inside
 * the smallest NestJS 11 app on @nestjs/platform-fastify. One module, one
 * controller, one POST route that reads the JSON body (account + label), runs
 * the very same touch script through ioredis `defineCommand` (EVALSHA, auto-
 * pipelining, the floor's Redis options) and returns the floor's JSON. No
 * guards, no pipes, no interceptors, no filters, no logger (`logger: false`),
 * no raw body. Its distance from the floor is what Nest itself costs per
 * request; the full service's distance from it is what our layers cost.
 *
 * tsx (esbuild) does not emit decorator metadata, so every constructor
 * parameter is injected by an explicit `@Inject(TOKEN)`.
 *
 * Env: PORT, REDIS_URL, KEY_PREFIX (default `nest-minimal`), LUA_DIR (default: the project's lua/).
 * Started by bench/http-floor.ts in its own process: `node --import tsx bench/nest-minimal-server.ts`.
 */
import 'reflect-metadata';
import { Body, Controller, HttpCode, Inject, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import Redis from 'ioredis';
import { connectTouchRedis, type TouchCommand } from './lib/touch-redis';

interface TouchBody {
  account: string;
  label: string;
  ttlSeconds?: number;
}


const REDIS = Symbol('REDIS');
const TOUCH = Symbol('TOUCH');
const PREFIX = Symbol('PREFIX');

@Controller('diagnostics')
class TouchController {
  constructor(
    @Inject(TOUCH) private readonly touchScript: TouchCommand,
    @Inject(PREFIX) private readonly prefix: string,
  ) {}

  @Post('touch')
  @HttpCode(200)
  async touch(@Body() body: TouchBody) {
    const { account, label, ttlSeconds } = body;
    const [count, serverTimeMs] = await this.touchScript(`${this.prefix}:diagnostics:{${account}}:visits:${label}`, (ttlSeconds ?? 3600) * 1000);
    return { accountId: account, label, count, serverTimeMs };
  }
}

@Module({
  controllers: [TouchController],
  providers: [
    { provide: PREFIX, useValue: process.env.KEY_PREFIX ?? 'nest-minimal' },
    {
      provide: REDIS,
      useFactory: async (): Promise<Redis> => (await connectTouchRedis()).redis,
    },
    {
      provide: TOUCH,
      inject: [REDIS],
      useFactory: (redis: Redis): TouchCommand => (redis as unknown as { touch: TouchCommand }).touch.bind(redis),
    },
  ],
})
class MinimalModule {}

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 3101);
  const app = await NestFactory.create<NestFastifyApplication>(MinimalModule, new FastifyAdapter({ logger: false }), { logger: false });
  const redis = app.get<Redis>(REDIS);

  const close = async () => {
    await app.close();
    redis.disconnect();
    process.exit(0);
  };
  process.once('SIGTERM', () => void close());
  process.once('SIGINT', () => void close());

  await app.listen({ port, host: '127.0.0.1' });
  console.error(`nest-minimal-server listening on 127.0.0.1:${port}`);
}

main().catch((err) => {
  console.error('nest-minimal-server failed:', err);
  process.exit(1);
});
