import { Global, Module } from '@nestjs/common';
import { ScriptRegistry } from '../scripts/script-registry.service';
import { BackgroundWorkers } from '../workers/background-workers.service';
import { KeyBuilder } from './key-builder';
import { RedisService } from './redis.service';

/**
 * Infrastructure shared by every feature: the Redis connections, the key
 * builder, the Lua script registry and the background-worker registry.
 * Global, so feature modules inject them without importing this module.
 */
@Global()
@Module({
  providers: [RedisService, KeyBuilder, ScriptRegistry, BackgroundWorkers],
  exports: [RedisService, KeyBuilder, ScriptRegistry, BackgroundWorkers],
})
export class RedisModule {}
