import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { LoggerService } from '@nestjs/common';
import { LogController, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import pino from 'pino';
import type PinoPretty from 'pino-pretty';
import { AppConfig } from '../config/app-config';

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

/** When Fastify began a request (`performance.now()`), on its raw request: stamped by the request-id generator, the first thing Fastify runs for a request. */
const STARTED = Symbol('redis-pay:requestStarted');
type StampedRequest = IncomingMessage & { [STARTED]?: number };

/**
 * Fastify `genReqId`: keeps a caller's request id when it is well-formed,
 * otherwise makes one. A made id has the shape of a UUID: a random prefix
 * drawn once per process, then a counter, so ids are unique across instances
 * without drawing 16 random bytes for every request. Fastify calls it first
 * for every request, so it also notes when the request began (the access
 * line's `responseTimeMs` and the request-duration metric count from there).
 */
export function requestIdGenerator(header: string) {
  const prefix = randomUUID().slice(0, 24);
  let made = 0;
  return (raw: StampedRequest): string => {
    raw[STARTED] = performance.now();
    const given = raw.headers[header];
    return typeof given === 'string' && REQUEST_ID_RE.test(given) ? given : prefix + (++made).toString(16).padStart(12, '0');
  };
}

/** Milliseconds since Fastify began `request` (0 for a request it did not begin: none in the service). */
const elapsedMs = (request: FastifyRequest): number => {
  const started = (request.raw as StampedRequest)[STARTED];
  return started === undefined ? 0 : performance.now() - started;
};

/**
 * One JSON access-log line per request, written when its answer is handed to
 * the socket (`completed`, from the service's onSend hook, which every answer
 * passes): `{requestId, method, url, route, statusCode, responseTimeMs, caller}`.
 * The request id is a field of the line: Fastify runs without a logger of its
 * own, so it makes no child logger per request and no response listeners;
 * this controller writes through the service's root logger. Fastify's other
 * request messages (its error log, a stream error, a route not found…) come
 * here too and go to the same logger. Headers are never logged, so
 * credentials cannot leak into logs.
 */
export class AccessLogController extends LogController {
  /** Also called for every completed request (the request-duration metric), so the service needs no onResponse hook. */
  onCompleted?: (request: FastifyRequest, reply: FastifyReply, route: string | undefined, elapsedMs: number) => void;

  constructor(private readonly log: pino.Logger) {
    super({ requestIdLogLabel: 'requestId' });
  }

  override incomingRequest(): void {
    // One line per request is enough: the completion line carries everything.
  }

  /** The answer to `request` is being sent: the access line and the metric. */
  completed(request: FastifyRequest, reply: FastifyReply): void {
    this.logRequest(undefined, request, reply, elapsedMs(request));
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    this.logRequest(error ?? undefined, request, reply, elapsedMs(request));
  }

  /** The access line and the metric of `request`, answered `elapsed` ms after it began. */
  logRequest(error: Error | undefined, request: FastifyRequest, reply: FastifyReply, elapsed: number): void {
    // Fastify builds a new routeOptions object on every read: read it once.
    const route = request.routeOptions.url;
    try {
      this.onCompleted?.(request, reply, route, elapsed);
    } catch (err) {
      this.log.error({ requestId: request.id, err }, 'request metric failed');
    }
    const status = reply.statusCode;
    const log = this.log;
    // The common case, a success at info level, is written by writeCompletedLine (same line, less work).
    if (!error && status < 400) {
      if (log.levelVal <= INFO) writeCompletedLine(log, request, route, status, elapsed);
      return;
    }
    const line = {
      requestId: request.id,
      method: request.method,
      url: request.url,
      route,
      statusCode: status,
      responseTimeMs: Math.round(elapsed * 100) / 100,
      caller: callerLabel(request),
    };
    if (error || status >= 500) log.error({ ...line, err: error }, 'request failed');
    else log.warn(line, 'request rejected');
  }

  // Fastify's own request messages, as its LogController words them, through the service's logger with the request id.
  override defaultErrorLog(error: Error, request: FastifyRequest, reply: FastifyReply): void {
    if (reply.statusCode >= 500) this.log.error({ requestId: request.id, err: error }, error?.message);
    else this.log.info({ requestId: request.id, err: error }, error?.message);
  }

  override streamError(error: Error & { code?: string }, request: FastifyRequest): void {
    if (error.code === 'ERR_STREAM_PREMATURE_CLOSE') this.log.info({ requestId: request.id }, 'stream closed prematurely');
    else this.log.warn({ requestId: request.id, err: error }, 'response terminated with an error with headers already sent');
  }

  override routeNotFound(request: FastifyRequest): void {
    this.log.info({ requestId: request.id }, `Route ${request.raw.method}:${request.raw.url} not found`);
  }

  override writeHeadError(error: Error, request: FastifyRequest): void {
    this.log.warn({ requestId: request.id, err: error }, error?.message);
  }

  override serializerError(error: Error, request: FastifyRequest, _reply: FastifyReply, metadata: { statusCode: number }): void {
    this.log.error({ requestId: request.id, err: error, statusCode: metadata.statusCode }, 'The serializer for the given status code failed');
  }

  override serviceUnavailable(): void {
    this.log.info({ res: { statusCode: 503 } }, 'request aborted - refusing to accept new requests as server is closing');
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

/**
 * How the log lines look: `pretty` (pino-pretty's readable lines) when a person reads them, i.e. stdout is a
 * terminal and the service does not run in production; JSON lines everywhere else (a pipe, a file, a container's
 * log driver, production whatever its stdout).
 */
export function logFormat(env: AppConfig['env'], stdoutIsTTY: boolean | undefined): 'pretty' | 'json' {
  return env !== 'production' && stdoutIsTTY === true ? 'pretty' : 'json';
}

/**
 * pino-pretty as the logger's destination, in process and synchronous (a line is on the terminal when the call
 * returns, as in development one expects), writing to `destination`. Undefined when pino-pretty is not installed (a
 * development run on an install without the dev dependencies): the lines stay JSON.
 */
export function prettyDestination(destination: number | NodeJS.WritableStream = 1): pino.DestinationStream | undefined {
  let build: typeof PinoPretty;
  try {
    build = require('pino-pretty') as typeof PinoPretty;
  } catch {
    return undefined;
  }
  return build({ destination, sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' });
}

/**
 * The service's root logger (pino), never a request's headers: JSON lines to stdout in batches, or readable lines
 * when `logFormat` says a person reads them.
 */
export function serviceLogger(config: AppConfig, stdoutIsTTY = process.stdout.isTTY): pino.Logger {
  const destination =
    config.logLevel === 'silent' ? undefined : ((logFormat(config.env, stdoutIsTTY) === 'pretty' ? prettyDestination() : undefined) ?? batchedStdout());
  return pino(
    {
      level: config.logLevel,
      base: { service: 'redis-pay' },
      // Never serialise a request with its headers (credentials live there).
      serializers: {
        req: (req: { method: string; url: string }) => ({ method: req.method, url: req.url }),
        res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
        err: pino.stdSerializers.err,
      },
    },
    destination,
  );
}

/**
 * Fastify's logging options: no logger of Fastify's own (so no child logger and no response listeners per request:
 * Fastify's request messages reach `log` through the AccessLogController), the request id from the header or made.
 */
export function fastifyLoggingOptions(
  config: AppConfig,
  log: pino.Logger,
): Pick<FastifyServerOptions, 'logger' | 'genReqId' | 'requestIdHeader'> & { logController: AccessLogController } {
  return {
    logger: false,
    logController: new AccessLogController(log),
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
  constructor(private readonly pino: pino.Logger) {}

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
