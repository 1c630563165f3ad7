import { Global, Module } from '@nestjs/common';
import { ScriptRegistry } from '../scripts/script-registry.service';
import { KeyBuilder } from './key-builder';
import { RedisService } from './redis.service';

/**
 * Infrastructure shared by every feature: the Redis connections, the key
 * builder and the Lua script registry.
 * Global, so feature modules inject them without importing this module.
 */
@Global()
@Module({
  providers: [RedisService, KeyBuilder, ScriptRegistry],
  exports: [RedisService, KeyBuilder, ScriptRegistry],
})
export class RedisModule {}
