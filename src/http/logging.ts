import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Params } from 'nestjs-pino';
import { AppConfig } from '../config/app-config';

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

/** Request headers never written to logs. */
export const REDACTED_HEADERS = [
  'authorization',
  'x-service-token',
  'x-admin-key',
  'x-signature',
  'x-merchant-secret',
  'cookie',
];

/**
 * Fastify `genReqId`: keeps a caller's request id when it is well-formed,
 * otherwise makes one. It is stored on the raw request so the pino-http logger
 * and Fastify agree on it.
 */
export function requestIdGenerator(header: string) {
  return (raw: IncomingMessage): string => {
    const given = raw.headers[header];
    const id = typeof given === 'string' && REQUEST_ID_RE.test(given) ? given : randomUUID();
    (raw as IncomingMessage & { id?: string }).id = id;
    return id;
  };
}

/** Structured JSON logs (pino) with the request id on every line of a request, secrets redacted. */
export function loggerParams(config: AppConfig): Params {
  return {
    pinoHttp: {
      level: config.logLevel,
      genReqId: (req) => (req as IncomingMessage & { id?: string }).id ?? randomUUID(),
      customAttributeKeys: { reqId: 'requestId' },
      redact: { paths: REDACTED_HEADERS.map((h) => `req.headers["${h}"]`), censor: '[redacted]' },
      serializers: {
        req: (req: { id: string; method: string; url: string; headers: Record<string, unknown> }) => ({
          method: req.method,
          url: req.url,
          headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, REDACTED_HEADERS.includes(k) ? '[redacted]' : v])),
        }),
        res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      },
      customSuccessMessage: (req, res) => `${req.method} ${req.url} ${res.statusCode}`,
      customErrorMessage: (req, res) => `${req.method} ${req.url} ${res.statusCode}`,
      customLogLevel: (_req, res, err) => (err || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'warn' : 'info'),
      quietReqLogger: true,
    },
  };
}
