import { Module } from '@nestjs/common';
import { RateLimitScripts } from './rate-limit.scripts';
import { RateLimiter } from './rate-limiter.service';

/** Per-caller rate limits with state in Redis: the limiter behind `RateLimitGuard` (registered globally, after AuthGuard, by AppModule). */
@Module({ providers: [RateLimitScripts, RateLimiter], exports: [RateLimiter] })
export class RateLimitModule {}
