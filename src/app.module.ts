import { DynamicModule, Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { AuthGuard } from './auth/auth.guard';
import { RateLimitGuard } from './rate-limit/rate-limit.guard';
import { AuthModule } from './auth/auth.module';
import { CacheModule } from './cache/cache.module';
import { CloseReminderModule } from './close-reminder';
import { SeckillModule } from './seckill';
import { RedEnvelopeModule } from './red-envelope';
import { WalletModule } from './wallet';
import { AppConfig } from './config/app-config';
import { ConfigModule } from './config/config.module';
import { DelayQueueModule } from './delay-queue/delay-queue.module';
import { DiagnosticsModule } from './diagnostics/diagnostics.module';
import { HealthModule } from './health/health.module';
import { LocksModule } from './locks/locks.module';
import { MessagesModule } from './messages';
import { MetricsModule } from './metrics/metrics.module';
import { OrdersModule } from './orders';
import { RateLimitModule } from './rate-limit/rate-limit.module';
import { RedisModule } from './redis/redis.module';
import { ScriptsModule } from './scripts/scripts.module';
import { WorkersModule } from './workers/workers.module';

/**
 * The root module. Infrastructure (config, metrics, Redis + scripts) is global;
 * features are ordinary modules listed here. The two global guards are
 * registered here, in order: identity first, then the per-caller rate limit
 * (which needs to know the caller).
 */
@Module({})
export class AppModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        MetricsModule,
        RedisModule,
        ScriptsModule,
        WorkersModule,
        CacheModule,
        AuthModule,
        RateLimitModule,
        DelayQueueModule,
        LocksModule,
        HealthModule,
        DiagnosticsModule,
        MessagesModule,
        WalletModule,
        OrdersModule,
        CloseReminderModule,
        SeckillModule,
        RedEnvelopeModule,
      ],
      providers: [
        { provide: APP_GUARD, useClass: AuthGuard },
        { provide: APP_GUARD, useClass: RateLimitGuard },
      ],
    };
  }
}
