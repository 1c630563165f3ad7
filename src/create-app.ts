import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { Logger } from 'nestjs-pino';
import { AppModule } from './app.module';
import { AppConfig } from './config/app-config';
import { AllExceptionsFilter, toErrorResponse } from './http/all-exceptions.filter';
import { requestIdGenerator } from './http/logging';
import { setupSwagger } from './http/swagger';
import { createValidationPipe } from './http/validation';
import { MetricsService } from './metrics/metrics.service';
import { Logger as NestLogger } from '@nestjs/common';

/**
 * Builds the whole application on Fastify, initialised but not listening.
 * `main.ts` and the end-to-end tests both use it, so tests run the real stack.
 */
export async function createApp(config: AppConfig): Promise<NestFastifyApplication> {
  const adapter = new FastifyAdapter({
    bodyLimit: config.bodyLimitBytes,
    genReqId: requestIdGenerator(config.requestIdHeader),
    requestIdHeader: false,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
  });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config), adapter, {
    bufferLogs: true,
    rawBody: true,
  });
  app.useLogger(app.get(Logger));
  app.useGlobalPipes(createValidationPipe());
  app.useGlobalFilters(new AllExceptionsFilter(config));

  const fastify = app.getHttpAdapter().getInstance();
  const metrics = app.get(MetricsService);
  const header = config.requestIdHeader;
  fastify.addHook('onRequest', (req, reply, done) => {
    void reply.header(header, req.id);
    done();
  });
  fastify.addHook('onResponse', (req, reply, done) => {
    metrics.httpDuration.observe(
      { method: req.method, route: req.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    done();
  });
  // Errors raised by Fastify itself (body too large, malformed JSON) get the same body shape.
  const errLogger = new NestLogger('HttpError');
  fastify.setErrorHandler((err, req, reply) => {
    const { status, body, headers } = toErrorResponse(err, String(req.id), config.redis.retryAfterS, errLogger);
    void reply.status(status).headers(headers).send(body);
  });

  if (config.swaggerEnabled) setupSwagger(app);
  await app.init();
  await fastify.ready();
  return app;
}
