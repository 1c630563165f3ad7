import { DynamicModule, Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { AuthGuard } from './platform/auth/auth.guard';
import { RateLimitGuard } from './platform/rate-limit/rate-limit.guard';
import { AuthModule } from './platform/auth/auth.module';
import { CacheModule } from './engines/cache/cache.module';
import { CloseReminderModule } from './features/close-reminder';
import { SeckillModule } from './features/seckill';
import { RedEnvelopeModule } from './features/red-envelope';
import { WalletModule } from './features/wallet';
import { AppConfig } from './platform/config/app-config';
import { ConfigModule } from './platform/config/config.module';
import { DelayQueueModule } from './engines/delay-queue/delay-queue.module';
import { DiagnosticsModule } from './platform/diagnostics/diagnostics.module';
import { DevTokenModule, servesDevRoutes } from './platform/auth/dev-token.module';
import { HealthModule } from './platform/health/health.module';
import { LocksModule } from './engines/locks/locks.module';
import { MessagesModule } from './features/messages';
import { MetricsModule } from './platform/metrics/metrics.module';
import { OrdersModule } from './features/orders';
import { RateLimitModule } from './platform/rate-limit/rate-limit.module';
import { RedisModule } from './platform/redis/redis.module';
import { ScriptsModule } from './platform/scripts/scripts.module';
import { WorkersModule } from './engines/workers/workers.module';

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
        // Development only: never part of a production service.
        ...(servesDevRoutes(config) ? [DevTokenModule] : []),
      ],
      providers: [
        { provide: APP_GUARD, useClass: AuthGuard },
        { provide: APP_GUARD, useClass: RateLimitGuard },
      ],
    };
  }
}
