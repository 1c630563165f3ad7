import { Controller, Get, Header, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProduces, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Auth } from '../auth/auth.decorators';
import { SkipRateLimit } from '../rate-limit/rate-limit.guard';
import { MetricsService } from '../metrics/metrics.service';

@ApiTags('ops')
@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: MetricsService) {}

  @Get()
  @Auth('admin')
  @SkipRateLimit()
  @Header('cache-control', 'no-store')
  @ApiOperation({ summary: 'Prometheus metrics (ops admin key). Scrape with the X-Admin-Key header.' })
  @ApiProduces('text/plain')
  @ApiOkResponse({ description: 'Prometheus text exposition format' })
  async scrape(@Res() reply: FastifyReply): Promise<void> {
    const { contentType, body } = await this.metrics.render();
    await reply.header('content-type', contentType).send(body);
  }
}
