import { type INestApplicationContext, Logger } from '@nestjs/common';
import { ModulesContainer, NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppModule } from './app.module';
import { BackgroundWorkers } from './engines/workers/background-workers.service';
import { AppConfig } from './platform/config/app-config';
import { AllExceptionsFilter, toErrorResponse } from './platform/http/all-exceptions.filter';
import { clientErrorHandler } from './platform/http/client.error';
import { compileRoutes } from './platform/http/compiled-routes';
import { dropAdapterResponseHook } from './platform/http/adapter-hooks';
import { ROUTE_BODY_LIMITS } from './platform/http/body-limits';
import { registerJsonBodyParser } from './platform/http/json-body';
import { fastifyLoggingOptions, PinoNestLogger, serviceLogger } from './platform/http/logging';
import { setupSwagger } from './platform/http/swagger';
import { pipeRouteParams } from './platform/http/route-pipes';
import { drainUnreadBody } from './platform/http/unread-body';
import { trackConnections } from './platform/http/unused-connections';
import { createValidationPipe } from './platform/http/validation';
import { MetricsService } from './platform/metrics/metrics.service';

/** What a client of the build in the same process needs (a benchmark's baseline server): see appContext. */
export { AppModule } from './app.module';
export { loadConfig } from './platform/config/load-config';
export { MessagesService } from './features/messages';
export { OrderEventsService, OrdersService } from './features/orders';
export { ScriptRegistry } from './platform/scripts/script-registry.service';

/**
 * The application without HTTP, for a client in the same process: every module initialised and, unless `workers`,
 * its background workers stopped (the caller drives the modules alone).
 */
export async function appContext(config: AppConfig, o: { workers: boolean }): Promise<INestApplicationContext> {
  const ctx = await NestFactory.createApplicationContext(AppModule.forRoot(config), { logger: ['error', 'warn'] });
  if (!o.workers) await ctx.get(BackgroundWorkers).stopAll();
  return ctx;
}

/**
 * Builds the whole application on Fastify, initialised but not listening.
 * `main.ts` and the end-to-end tests both use it, so tests run the real stack.
 */
export async function createApp(config: AppConfig): Promise<NestFastifyApplication> {
  const frameworkLogger = new Logger('HttpError');
  const log = serviceLogger(config);
  const logging = fastifyLoggingOptions(config, log);
  const adapter = new FastifyAdapter({
    ...logging,
    bodyLimit: config.bodyLimitBytes,
    // A client sending its request slowly (a trickled body, slowloris) holds a connection for at most this long, then
    // gets 408 (clientErrorHandler). Fastify's default, 0, let a body of 1 byte every few seconds hold one forever.
    requestTimeout: config.requestTimeoutMs,
    http: {
      // Node swaps the two timeouts when the headers' one is the longer (its default, 60 s, is), and then a body had 60 s.
      headersTimeout: Math.min(60_000, config.requestTimeoutMs),
      // Node checks both on a timer (30 s by default): a third of the timeout, so a slow sender is cut within 4/3 of it.
      connectionsCheckingInterval: Math.min(30_000, Math.max(1000, Math.floor(config.requestTimeoutMs / 3))),
    },
    // Path parameters up to this length reach validation (and get a 400 naming the field);
    // Fastify's default of 100 would answer a longer one with its own 414, outside our conventions.
    routerOptions: { maxParamLength: 512 },
    return503OnClosing: true,
    // What the HTTP parser refuses (headers too large, a malformed request line) gets the one error shape too.
    clientErrorHandler: clientErrorHandler(config.requestIdHeader),
    forceCloseConnections: 'idle',
    // A malformed percent-encoding or an over-long path parameter is refused by the router, before
    // any hook or Nest filter: answer it in the service's one error shape too.
    frameworkErrors: (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
      const { status, body, headers } = toErrorResponse(err, String(req.id), config.redis.retryAfterS, frameworkLogger);
      void reply
        .status(status)
        .headers({ ...headers, [config.requestIdHeader]: String(req.id) })
        .send(body);
    },
  });
  dropAdapterResponseHook(adapter);
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config), adapter, {
    bufferLogs: true,
    // registerJsonBodyParser below is the only body parser (it keeps the raw bytes for merchant signatures).
    bodyParser: false,
  });
  const fastify = app.getHttpAdapter().getInstance();
  registerJsonBodyParser(fastify);
  app.useLogger(new PinoNestLogger(log));
  // The validation pipe of every body, query and path parameter: a global pipe, placed on those parameters only.
  pipeRouteParams(app.get(ModulesContainer), createValidationPipe());
  // Each route's guards, pipes, handler and reply as one function, made when app.init() registers the routes.
  compileRoutes();
  app.useGlobalFilters(new AllExceptionsFilter(config));

  // Routes are registered in app.init() below, so this hook sees every one of them.
  fastify.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      const limit = ROUTE_BODY_LIMITS.get(`${method} ${route.url}`);
      if (limit) route.bodyLimit = Math.max(limit, config.bodyLimitBytes);
    }
  });

  const metrics = app.get(MetricsService);
  const header = config.requestIdHeader;
  logging.logController.onCompleted = (req, reply, route, elapsedMs) =>
    metrics.httpDuration.observe(req.method, route ?? 'unmatched', reply.statusCode, elapsedMs / 1000);
  // While draining, answer in-flight requests with `Connection: close` so keep-alive sockets do not hold the shutdown open,
  // and end the connections with no request in progress (see trackConnections).
  let draining = false;
  const connections = trackConnections(fastify.server);
  fastify.addHook('preClose', (done) => {
    draining = true;
    connections.closeUnused();
    done();
  });
  // Every answer sent through Fastify passes here (errors too, from any stage): one hook for all that is added to each.
  fastify.addHook('onSend', (req, reply, payload, done) => {
    void reply.header(header, req.id);
    // The access line and the request-duration metric: the answer is complete and leaves now.
    logging.logController.completed(req, reply);
    if (draining) void reply.header('connection', 'close');
    // An error answered before its body was read (a 413, a 415): the rest of the body is read first, so that closing
    // the connection resets nothing and the client reads the answer (see drainUnreadBody).
    if (reply.statusCode >= 400 && !req.raw.complete) void drainUnreadBody(req.raw).then(() => done(null, payload));
    else done(null, payload);
  });

  if (config.swaggerEnabled) setupSwagger(app);
  await app.init();
  await fastify.ready();
  return app;
}
