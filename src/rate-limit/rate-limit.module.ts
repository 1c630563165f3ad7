import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { RateLimitGuard } from './rate-limit.guard';
import { RateLimitScripts } from './rate-limit.scripts';
import { RateLimiter } from './rate-limiter.service';

/** Per-caller rate limits with state in Redis. Import after `AuthModule` so its guard runs second. */
@Module({ providers: [RateLimitScripts, RateLimiter, { provide: APP_GUARD, useClass: RateLimitGuard }] })
export class RateLimitModule {}
