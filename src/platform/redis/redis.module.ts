import { Global, Module } from '@nestjs/common';
import { KeyBuilder } from './key-builder';
import { RedisService } from './redis.service';

/**
 * Infrastructure shared by every feature: the Redis connections and the key
 * builder (the Lua script registry is the scripts module's, the background
 * workers the workers module's; both use these connections). Global, so
 * feature modules inject them without importing this module.
 */
@Global()
@Module({
  providers: [RedisService, KeyBuilder],
  exports: [RedisService, KeyBuilder],
})
export class RedisModule {}
