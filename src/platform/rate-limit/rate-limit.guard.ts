import { CanActivate, ExecutionContext, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppConfig } from '../config/app-config';
import { RateLimitedError } from '../core/domain.error';
import { RateLimiter, type RateLimitVerdict } from './rate-limiter.service';

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

  /** Whether each handler skips the limit, looked up once per handler. */
  private readonly skipped = new WeakMap<object, boolean>();

  canActivate(ctx: ExecutionContext): boolean | Promise<boolean> {
    const rl = this.config.rateLimit;
    if (!rl.enabled || this.skips(ctx)) return true;
    // HTTP-only guard: request and reply are arguments 0 and 1 (switchToHttp() would make three closures per call).
    const req = ctx.getArgByIndex<FastifyRequest>(0);
    const caller = req.caller ?? { kind: 'anonymous' as const, id: req.ip };
    const limit = rl.limits[caller.kind];
    const reply = ctx.getArgByIndex<FastifyReply>(1);
    // Most requests spend a token this instance already holds: decided synchronously.
    const local = this.limiter.takeLocal(caller, limit);
    if (local) return this.admit(reply, local);
    return this.limiter.take(caller, limit).then((verdict) => this.admit(reply, verdict));
  }

  private admit(reply: FastifyReply, verdict: RateLimitVerdict): true {
    void reply.header('x-ratelimit-limit', verdict.limit).header('x-ratelimit-remaining', verdict.remaining);
    if (!verdict.allowed)
      throw new RateLimitedError(`Rate limit of ${verdict.limit} requests per ${this.config.rateLimit.windowMs} ms exceeded`, verdict.resetMs);
    return true;
  }

  private skips(ctx: ExecutionContext): boolean {
    const handler = ctx.getHandler();
    let skip = this.skipped.get(handler);
    if (skip === undefined) {
      skip = this.reflector.getAllAndOverride<boolean>(SKIP_RATE_LIMIT, [handler, ctx.getClass()]) === true;
      this.skipped.set(handler, skip);
    }
    return skip;
  }
}
