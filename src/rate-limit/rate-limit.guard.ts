import { CanActivate, ExecutionContext, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppConfig } from '../config/app-config';
import { rateLimited } from '../http/api-error';
import { RateLimiter } from './rate-limiter.service';

export const SKIP_RATE_LIMIT = 'rate-limit:skip';
/** Exempts a route from rate limiting (health probes, which must not depend on Redis). */
export const SkipRateLimit = () => SetMetadata(SKIP_RATE_LIMIT, true);

/**
 * Global guard, after `AuthGuard`: limits each caller (kind + id; anonymous
 * callers by IP) to a configured number of requests per window. The counters
 * live in Redis, so the limit holds across instances (`RateLimiter`). Over the
 * limit: 429 with Retry-After.
 */
@Injectable()
export class RateLimitGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly config: AppConfig,
    private readonly limiter: RateLimiter,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const rl = this.config.rateLimit;
    if (!rl.enabled) return true;
    if (this.reflector.getAllAndOverride<boolean>(SKIP_RATE_LIMIT, [ctx.getHandler(), ctx.getClass()])) return true;
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    const caller = req.caller ?? { kind: 'anonymous' as const, id: req.ip };
    const limit = rl.limits[caller.kind];
    const verdict = await this.limiter.take(caller, limit);
    const reply = ctx.switchToHttp().getResponse<FastifyReply>();
    void reply.header('x-ratelimit-limit', limit).header('x-ratelimit-remaining', verdict.remaining);
    if (!verdict.allowed) throw rateLimited(`Rate limit of ${limit} requests per ${rl.windowMs} ms exceeded`, verdict.resetMs);
    return true;
  }
}
