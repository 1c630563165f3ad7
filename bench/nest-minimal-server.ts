/**
 * The "nest-minimal" row of the http-floor benchmark: the floor's work inside
 * the smallest NestJS 11 app on @nestjs/platform-fastify. One module, one
 * controller, one POST route that reads the JSON body (account + label), runs
 * the very same touch script as the service sends it (`evalScript`: EVALSHA, on the
 * floor's connection: see connectTouchRedis) and returns the floor's JSON. No
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
import { answerTouch, connectTouchRedis, type TouchBody } from './floor-server';
import { serveUntilSignal } from './lib/bare-server';

/** `connectTouchRedis()`'s connection and touch command. */
const TOUCH_REDIS = Symbol('TOUCH_REDIS');
const PREFIX = Symbol('PREFIX');
type TouchRedis = Awaited<ReturnType<typeof connectTouchRedis>>;

@Controller('diagnostics')
class TouchController {
  constructor(
    @Inject(TOUCH_REDIS) private readonly redis: TouchRedis,
    @Inject(PREFIX) private readonly prefix: string,
  ) {}

  @Post('touch')
  @HttpCode(200)
  touch(@Body() body: TouchBody) {
    return answerTouch(this.redis.touch, this.prefix, body);
  }
}

@Module({
  controllers: [TouchController],
  providers: [
    { provide: PREFIX, useValue: process.env.KEY_PREFIX ?? 'nest-minimal' },
    { provide: TOUCH_REDIS, useFactory: connectTouchRedis },
  ],
})
class MinimalModule {}

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 3101);
  const app = await NestFactory.create<NestFastifyApplication>(MinimalModule, new FastifyAdapter({ logger: false }), { logger: false });
  await serveUntilSignal('nest-minimal-server', port, app, app.get<TouchRedis>(TOUCH_REDIS).redis);
}

main().catch((err) => {
  console.error('nest-minimal-server failed:', err);
  process.exit(1);
});
