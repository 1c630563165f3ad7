import { Global, Module } from '@nestjs/common';
import { ScriptRegistry } from './script-registry.service';

/** The Lua script registry, global beside the Redis module (whose connections it uses), so stores inject it without importing this module. */
@Global()
@Module({ providers: [ScriptRegistry], exports: [ScriptRegistry] })
export class ScriptsModule {}
