import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { LoggerService } from '@nestjs/common';
import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import pino from 'pino';
import { AppConfig } from '../config/app-config';

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Fastify `genReqId`: keeps a caller's request id when it is well-formed,
 * otherwise makes one. A made id has the shape of a UUID: a random prefix
 * drawn once per process, then a counter, so ids are unique across instances
 * without drawing 16 random bytes for every request.
 */
export function requestIdGenerator(header: string) {
  const prefix = randomUUID().slice(0, 24);
  let made = 0;
  return (raw: IncomingMessage): string => {
    const given = raw.headers[header];
    return typeof given === 'string' && REQUEST_ID_RE.test(given) ? given : prefix + (++made).toString(16).padStart(12, '0');
  };
}

/**
 * One JSON access-log line per request, written when the response is done:
 * `{requestId, method, url, route, statusCode, responseTimeMs, caller}`. The
 * request id is a field of the line, not a binding of a per-request child
 * logger: making a child logger for every request cost more than the line.
 * Headers are never logged, so credentials cannot leak into logs.
 */
export class AccessLogController extends LogController {
  /** Also called for every completed request (the request-duration metric), so the service needs no onResponse hook. */
  onCompleted?: (request: FastifyRequest, reply: FastifyReply, route: string | undefined) => void;

  override incomingRequest(): void {
    // One line per request is enough: the completion line carries everything.
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    // Fastify builds a new routeOptions object on every read: read it once.
    const route = request.routeOptions.url;
    try {
      this.onCompleted?.(request, reply, route);
    } catch (err) {
      reply.log.error({ requestId: request.id, err }, 'request metric failed');
    }
    const status = reply.statusCode;
    const log = reply.log as pino.Logger;
    // The common case, a success at info level, is written by writeCompletedLine (same line, less work).
    if (!error && status < 400) {
      if (log.levelVal <= INFO) writeCompletedLine(log, request, route, status, reply.elapsedTime);
      return;
    }
    const line = {
      requestId: request.id,
      method: request.method,
      url: request.url,
      route,
      statusCode: status,
      responseTimeMs: Math.round(reply.elapsedTime * 100) / 100,
      caller: callerLabel(request),
    };
    if (error || status >= 500) log.error({ ...line, err: error ?? undefined }, 'request failed');
    else log.warn(line, 'request rejected');
  }
}

const { lsCacheSym, timeSym, chindingsSym, streamSym } = pino.symbols;
const INFO = 30;
const callerLabel = (request: FastifyRequest): string | undefined =>
  request.caller && request.caller.kind !== 'anonymous' ? `${request.caller.kind}:${request.caller.id}` : undefined;

/**
 * The access line of a completed request, exactly as `log.info({requestId, method, url, route, statusCode,
 * responseTimeMs, caller}, 'request completed')` would write it (logging.spec.ts holds the two side by side),
 * but concatenated in one expression: pino's general path walks the object, escapes every key and tests every
 * value's type, which was a third of the logging cost of a request. Level, time and the logger's bindings
 * (pid, hostname, service) still come from pino.
 */
function writeCompletedLine(log: pino.Logger, request: FastifyRequest, route: string | undefined, status: number, elapsedMs: number): void {
  const caller = callerLabel(request);
  // pino's own pieces: the level's opening `{"level":30`, `,"time":…`, the bindings, the destination.
  const p = log as unknown as Record<symbol, unknown>;
  (p[streamSym] as pino.DestinationStream).write(
    (p[lsCacheSym] as Record<number, string>)[INFO] +
      (p[timeSym] as () => string)() +
      (p[chindingsSym] as string) +
      ',"requestId":' +
      JSON.stringify(request.id) +
      ',"method":' +
      JSON.stringify(request.method) +
      ',"url":' +
      JSON.stringify(request.url) +
      (route === undefined ? '' : ',"route":' + JSON.stringify(route)) +
      ',"statusCode":' +
      status +
      ',"responseTimeMs":' +
      Math.round(elapsedMs * 100) / 100 +
      (caller === undefined ? '' : ',"caller":' + JSON.stringify(caller)) +
      ',"msg":"request completed"}\n',
  );
}

/** How long a log line may wait to be written with the lines after it, and how many bytes make a write at once. */
const LOG_FLUSH_MS = 5;
const LOG_FLUSH_BYTES = 64 * 1024;

/** Log lines not yet written, their length, and where they go. */
let pendingLines: string[] = [];
let pendingBytes = 0;
let flushTimer: NodeJS.Timeout | undefined;
let stdout: pino.DestinationStream | undefined;

function writePendingLines(): void {
  if (flushTimer) clearTimeout(flushTimer);
  flushTimer = undefined;
  if (pendingLines.length === 0 || !stdout) return;
  const out = pendingLines.join('');
  pendingLines = [];
  pendingBytes = 0;
  stdout.write(out);
}

/**
 * stdout for pino, written in batches: the lines logged within LOG_FLUSH_MS (or
 * LOG_FLUSH_BYTES of them, whichever comes first) leave in one write, instead
 * of one blocking write per line. Under load that is one write for many
 * requests' access lines; a write per event-loop turn cost about a microsecond
 * of every request. The writing is pino's own synchronous destination
 * (sonic-boom: a full pipe is retried, not queued in memory; a reader that
 * went away is not a crash), and the lines still pending at exit are written
 * then (a SIGKILL loses at most the last LOG_FLUSH_MS of lines).
 */
function batchedStdout(): pino.DestinationStream {
  if (!stdout) {
    stdout = pino.destination({ dest: 1, sync: true });
    process.on('exit', writePendingLines);
  }
  return {
    write(line: string): void {
      pendingLines.push(line);
      pendingBytes += line.length;
      if (pendingBytes >= LOG_FLUSH_BYTES) writePendingLines();
      // Unref'd: a pending line never keeps the process alive (the exit hook writes it).
      else if (!flushTimer) flushTimer = setTimeout(writePendingLines, LOG_FLUSH_MS).unref();
    },
  };
}

/** Fastify's logger (pino): JSON lines, the request id on every line of a request. */
export function fastifyLoggingOptions(
  config: AppConfig,
): Pick<FastifyServerOptions, 'logger' | 'childLoggerFactory' | 'genReqId' | 'requestIdHeader'> & { logController: AccessLogController } {
  return {
    logger: {
      level: config.logLevel,
      base: { service: 'redis-pay' },
      // Never serialise a request with its headers (credentials live there).
      serializers: { req: (req: { method: string; url: string }) => ({ method: req.method, url: req.url }) },
      ...(config.logLevel === 'silent' ? {} : { stream: batchedStdout() }),
    },
    logController: new AccessLogController({ requestIdLogLabel: 'requestId' }),
    // Every request logs through the root logger (the access line carries its own requestId).
    childLoggerFactory: (logger) => logger,
    genReqId: requestIdGenerator(config.requestIdHeader),
    requestIdHeader: false,
  };
}

/**
 * Nest's LoggerService on top of the same pino logger, so framework and
 * service logs are JSON too. Accepts both Nest style `log(message, context)`
 * and pino style `log({fields}, message, context)`.
 */
export class PinoNestLogger implements LoggerService {
  constructor(private readonly pino: FastifyBaseLogger) {}

  log(message: unknown, ...rest: unknown[]): void {
    this.write('info', message, rest);
  }
  error(message: unknown, ...rest: unknown[]): void {
    this.write('error', message, rest);
  }
  warn(message: unknown, ...rest: unknown[]): void {
    this.write('warn', message, rest);
  }
  debug(message: unknown, ...rest: unknown[]): void {
    this.write('debug', message, rest);
  }
  verbose(message: unknown, ...rest: unknown[]): void {
    this.write('trace', message, rest);
  }
  fatal(message: unknown, ...rest: unknown[]): void {
    this.write('fatal', message, rest);
  }

  private write(level: 'info' | 'error' | 'warn' | 'debug' | 'trace' | 'fatal', message: unknown, rest: unknown[]): void {
    if (!(this.pino as unknown as { isLevelEnabled(l: string): boolean }).isLevelEnabled(level)) return;
    // Nest appends the context (the logger's name) as the last string argument.
    const args = [...rest];
    const context = args.length > 0 && typeof args[args.length - 1] === 'string' ? (args.pop() as string) : undefined;
    if (message !== null && typeof message === 'object' && !(message instanceof Error)) {
      const msg = typeof args[0] === 'string' ? (args.shift() as string) : undefined;
      this.pino[level]({ context, ...(message as object) }, msg);
    } else if (message instanceof Error) {
      this.pino[level]({ context, err: message }, message.message);
    } else {
      // Nest passes an error's stack as the second argument of error().
      const stack = level === 'error' && typeof args[0] === 'string' ? args[0] : undefined;
      this.pino[level]({ context, ...(stack ? { stack } : {}) }, String(message));
    }
  }
}
