import { Global, Module } from '@nestjs/common';
import { MetricsService } from './metrics.service';

/** The metrics registry, global; its scrape endpoint (`GET /metrics`) is served by the health module. */
@Global()
@Module({ providers: [MetricsService], exports: [MetricsService] })
export class MetricsModule {}
