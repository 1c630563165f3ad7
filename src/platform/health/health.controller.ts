import { Controller, Get, HttpCode, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProperty, ApiServiceUnavailableResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Public } from '../auth/auth.decorators';
import { AppConfig } from '../config/app-config';
import { SkipRateLimit } from '../rate-limit/rate-limit.guard';
import { RedisService } from '../redis/redis.service';
import { ScriptRegistry } from '../scripts/script-registry.service';

// Spelled out: the Swagger plugin reads only *.dto.ts files, and left this schema without properties.
class ReadyBody {
  @ApiProperty({ enum: ['ready', 'not-ready'], example: 'ready' }) status!: 'ready' | 'not-ready';
  @ApiProperty({ enum: ['up', 'down'], example: 'up' }) redis!: 'up' | 'down';
  @ApiProperty({ example: true }) scriptsLoaded!: boolean;
}

/** Probes for the orchestrator. Public (probes carry no credentials) and never rate limited. */
@ApiTags('ops')
@Public()
@SkipRateLimit()
@Controller('health')
export class HealthController {
  constructor(
    private readonly redis: RedisService,
    private readonly scripts: ScriptRegistry,
    private readonly config: AppConfig,
  ) {}

  @Get('live')
  @HttpCode(200)
  @ApiOperation({ summary: 'Liveness: the process is up. Does not touch Redis.' })
  @ApiOkResponse({ schema: { example: { status: 'live' } } })
  live(): { status: 'live' } {
    return { status: 'live' };
  }

  @Get('ready')
  @ApiOperation({ summary: 'Readiness: Redis answers PING within the command timeout and every Lua script is loaded.' })
  @ApiOkResponse({ type: ReadyBody })
  @ApiServiceUnavailableResponse({ type: ReadyBody })
  async ready(@Res({ passthrough: true }) reply: FastifyReply): Promise<ReadyBody> {
    const redisUp = await this.redis.client
      .ping()
      .then(() => true)
      .catch(() => false);
    const scriptsLoaded = this.scripts.isLoaded;
    const ok = redisUp && scriptsLoaded;
    if (!ok) void reply.status(503).header('retry-after', String(this.config.redis.retryAfterS));
    return { status: ok ? 'ready' : 'not-ready', redis: redisUp ? 'up' : 'down', scriptsLoaded };
  }
}
