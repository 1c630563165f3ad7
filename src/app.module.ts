import { DynamicModule, Module } from '@nestjs/common';
import { AuthModule } from './auth/auth.module';
import { AppConfig } from './config/app-config';
import { ConfigModule } from './config/config.module';
import { DiagnosticsModule } from './diagnostics/diagnostics.module';
import { HealthModule } from './health/health.module';
import { MetricsModule } from './metrics/metrics.module';
import { RateLimitModule } from './rate-limit/rate-limit.module';
import { RedisModule } from './redis/redis.module';

/**
 * The root module. Infrastructure (config, metrics, Redis + scripts) is global;
 * features are ordinary modules listed here. AuthModule comes before
 * RateLimitModule so the identity guard runs before the rate-limit guard.
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
        AuthModule,
        RateLimitModule,
        HealthModule,
        DiagnosticsModule,
      ],
    };
  }
}
