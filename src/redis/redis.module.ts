import { Global, Module } from '@nestjs/common';
import { BackgroundWorkers } from '../workers/background-workers.service';
import { KeyBuilder } from './key-builder';
import { RedisService } from './redis.service';

/**
 * Infrastructure shared by every feature: the Redis connections, the key
 * builder and the background-worker registry (the Lua script registry is the
 * scripts module's, which uses these connections). Global, so feature modules
 * inject them without importing this module.
 */
@Global()
@Module({
  providers: [RedisService, KeyBuilder, BackgroundWorkers],
  exports: [RedisService, KeyBuilder, BackgroundWorkers],
})
export class RedisModule {}
