import { Module } from '@nestjs/common';
import { HealthController } from './health.controller';
import { MetricsController } from './metrics.controller';

/** The ops endpoints: health and readiness, and the Prometheus scrape (`GET /metrics`). */
@Module({ controllers: [HealthController, MetricsController] })
export class HealthModule {}
