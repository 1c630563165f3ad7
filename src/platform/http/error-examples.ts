import type { INestApplication, Type } from '@nestjs/common';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import { ModulesContainer } from '@nestjs/core';
import type {
  ExampleObject,
  MediaTypeObject,
  OpenAPIObject,
  OperationObject,
  ParameterObject,
  ReferenceObject,
  ResponseObject,
  SchemaObject,
} from '@nestjs/swagger';
import { plainToInstance } from 'class-transformer';
import { validateSync, type ValidatorOptions } from 'class-validator';
import type { CallerKind } from './caller';
import { SECURITY } from './security-schemes';
import { AppConfig } from '../config/app-config';
import { RedisUnavailableError } from '../redis/redis-unavailable.error';
import { ForbiddenError, RateLimitedError, UnauthenticatedError } from '../core/domain.error';
import { ApiError } from './api.error';
import { errorExample } from './error-responses';
import { unsupportedMediaType } from './json-body';
import { validationPipeOptions } from './validation';

const KINDS: CallerKind[] = ['user', 'merchant', 'service', 'admin'];
const KIND_OF_SCHEME: Record<string, CallerKind> = {
  [SECURITY.user]: 'user',
  [SECURITY.merchant]: 'merchant',
  [SECURITY.service]: 'service',
  [SECURITY.admin]: 'admin',
};

/**
 * A typical 401 of each kind of credential, worded as the guard and verifiers
 * word it (test/e2e/openapi.e2e-spec.ts sends each and compares).
 */
export const INVALID_CREDENTIAL: Record<CallerKind, { summary: string; message: string }> = {
  user: { summary: 'An expired bearer token', message: 'Bearer token has expired' },
  merchant: { summary: 'A merchant signature that does not match the request', message: 'X-Signature does not match the request for this X-Merchant-Id' },
  service: { summary: 'An unknown service token', message: 'Invalid service token' },
  admin: { summary: 'An unknown admin key', message: 'Invalid admin key' },
};

/** The DTOs a route validates: its `@Body()`, `@Param()` and `@Query()` classes. */
export interface RouteInputs {
  body?: Type;
  path?: Type;
  query?: Type;
}

type Location = keyof RouteInputs;
const PIPE_TYPE: Record<Location, RouteParamtypes> = { body: RouteParamtypes.BODY, path: RouteParamtypes.PARAM, query: RouteParamtypes.QUERY };

/** Every route's inputs, by its default operationId (`<Controller>_<method>`). */
export function routeInputs(app: INestApplication): Map<string, RouteInputs> {
  const out = new Map<string, RouteInputs>();
  for (const module of app.get(ModulesContainer).values()) {
    for (const { metatype } of module.controllers.values()) {
      if (!metatype) continue;
      for (const method of Object.getOwnPropertyNames(metatype.prototype)) {
        const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, metatype, method) ?? {}) as Record<string, { index: number; data?: unknown }>;
        const types = (Reflect.getMetadata('design:paramtypes', metatype.prototype, method) ?? []) as Type[];
        const inputs: RouteInputs = {};
        for (const [key, { index, data }] of Object.entries(args)) {
          const location = (Object.keys(PIPE_TYPE) as Location[]).find((l) => `${PIPE_TYPE[l]}` === key.split(':')[0]);
          if (location && data === undefined && types[index]) inputs[location] = types[index];
        }
        out.set(`${metatype.name}_${method}`, inputs);
      }
    }
  }
  return out;
}

const MISSING = Symbol('missing');

interface Field {
  location: Location;
  name: string;
  schema: SchemaObject;
  required: boolean;
}

/**
 * A 400 of this route: its first required field (body, then path, then query;
 * else its first field) given a wrong value, the rest of the input taken from
 * the documented examples, run through the same class-validator rules and
 * error factory as the global validation pipe. The summary says what was sent.
 */
function badRequestExample(doc: OpenAPIObject, op: OperationObject, inputs: RouteInputs): [string, ExampleObject] | undefined {
  const fields = fieldsOf(doc, op);
  const ordered = [...fields.filter((f) => f.required), ...fields.filter((f) => !f.required)];
  for (const field of ordered) {
    const dto = inputs[field.location];
    if (!dto) continue;
    const base = Object.fromEntries(fields.filter((f) => f.location === field.location && f.required && f !== field).map((f) => [f.name, sampleOf(f)]));
    let best: { err: ApiError; count: number; sent: string } | undefined;
    for (const value of probesFor(field)) {
      const input = value === MISSING ? base : { ...base, [field.name]: value };
      const err = validationError(dto, input);
      const details = (err?.details ?? []) as Array<{ field: string; errors: string[] }>;
      if (!err || details.length !== 1 || details[0].field !== field.name) continue;
      const count = details[0].errors.length;
      if (!best || count < best.count) best = { err, count, sent: value === MISSING ? `${field.name} missing` : `${field.name}: ${JSON.stringify(value)}` };
      if (count === 1) break;
    }
    if (best) return [field.name, errorExample(best.err, best.sent)];
  }
  return undefined;
}

function validationError(dto: Type, input: object): ApiError | undefined {
  const options = validationPipeOptions();
  const errors = validateSync(plainToInstance(dto, input, options.transformOptions) as object, options as ValidatorOptions);
  return errors.length > 0 ? (options.exceptionFactory!(errors) as ApiError) : undefined;
}

/** Values that break one rule each, from the field's documented limits; path and query values are strings. */
function probesFor(field: Field): unknown[] {
  const s = field.schema;
  const candidates: unknown[] = ['!'];
  if (s.maxLength !== undefined) candidates.push('x'.repeat(s.maxLength + 1));
  if (s.minLength) candidates.push('');
  if (s.maximum !== undefined) candidates.push(s.maximum + 1);
  if (s.minimum !== undefined) candidates.push(s.minimum - 1);
  candidates.push(0.5);
  if (field.location === 'body') candidates.push([], 42, MISSING);
  if (field.location === 'query') candidates.push(MISSING);
  return field.location === 'body' ? candidates : candidates.filter((c) => c !== '' || field.location === 'query').map((c) => (c === MISSING ? c : String(c)));
}

function sampleOf(f: Field): unknown {
  const v = f.schema.example ?? f.schema.default ?? f.schema.enum?.[0];
  return f.location === 'body' ? v : String(v);
}

function fieldsOf(doc: OpenAPIObject, op: OperationObject): Field[] {
  const out: Field[] = [];
  const body = resolve(doc, (op.requestBody as { content?: Record<string, MediaTypeObject> } | undefined)?.content?.['application/json']?.schema);
  for (const [name, schema] of Object.entries(body?.properties ?? {})) {
    out.push({ location: 'body', name, schema: resolve(doc, schema) ?? {}, required: body?.required?.includes(name) ?? false });
  }
  for (const location of ['path', 'query'] as const) {
    for (const p of (op.parameters ?? []) as ParameterObject[]) {
      if (p.in === location) out.push({ location, name: p.name, schema: { example: p.example, ...resolve(doc, p.schema) }, required: p.required ?? false });
    }
  }
  return out;
}

function resolve(doc: OpenAPIObject, s: SchemaObject | ReferenceObject | undefined): SchemaObject | undefined {
  if (s && '$ref' in s) return doc.components?.schemas?.[s.$ref.replace('#/components/schemas/', '')] as SchemaObject | undefined;
  return s;
}

/** The caller kinds an operation's security accepts, in the order `@Auth` lists them. */
function kindsOf(op: OperationObject): CallerKind[] {
  return [
    ...new Set(
      (op.security ?? []).flatMap((req) =>
        Object.keys(req)
          .map((scheme) => KIND_OF_SCHEME[scheme])
          .filter(Boolean),
      ),
    ),
  ];
}

/**
 * Gives every documented error response that has no examples yet the ones
 * that fit its operation (see `ApiErrors`). Run on the built document.
 */
export function addErrorExamples(doc: OpenAPIObject, app: INestApplication): void {
  const config = app.get(AppConfig);
  const inputs = routeInputs(app);
  const examples = (status: string, op: OperationObject): Record<string, ExampleObject> | undefined => {
    const kinds = kindsOf(op);
    switch (status) {
      case '400': {
        const found = badRequestExample(doc, op, inputs.get(op.operationId ?? '') ?? {});
        return found && { [found[0]]: found[1] };
      }
      case '401':
        return Object.fromEntries([
          ['missing', errorExample(new UnauthenticatedError(`Missing credentials; this endpoint accepts: ${kinds.join(', ')}`), 'No credentials')],
          ...kinds.map((k) => [k, errorExample(new UnauthenticatedError(INVALID_CREDENTIAL[k].message), INVALID_CREDENTIAL[k].summary)]),
        ]);
      case '403': {
        const other = KINDS.find((k) => !kinds.includes(k));
        return (
          other && {
            [other]: errorExample(
              new ForbiddenError(`This endpoint is not for ${other} callers; it accepts: ${kinds.join(', ')}`),
              `A valid ${other} credential`,
            ),
          }
        );
      }
      case '429': {
        const { limits, windowMs } = config.rateLimit;
        const limit = limits[kinds[0] ?? 'anonymous'];
        return {
          RATE_LIMITED: errorExample(
            new RateLimitedError(`Rate limit of ${limit} requests per ${windowMs} ms exceeded`, windowMs),
            `Over ${limit} requests in ${windowMs} ms`,
          ),
        };
      }
      case '503':
        return { REDIS_UNAVAILABLE: errorExample(new RedisUnavailableError(), 'Redis did not answer within the command timeout', config.redis.retryAfterS) };
    }
    return undefined;
  };
  for (const item of Object.values(doc.paths)) {
    for (const op of Object.values(item) as OperationObject[]) {
      if (!op?.responses) continue;
      for (const [status, response] of Object.entries(op.responses as Record<string, ResponseObject>)) {
        // Under whatever media type the route produces (`@ApiProduces`), an error is JSON.
        const media = Object.values(response.content ?? {}).find((m) => isErrorBody(m.schema));
        if (!media) continue;
        const found = media.examples ?? (media.example === undefined ? examples(status, op) : undefined);
        // A fresh object per operation: a controller's responses are one object shared by its routes.
        op.responses[status] = { ...response, content: { 'application/json': { ...media, ...(found ? { examples: found } : {}) } } };
      }
    }
  }
}

const isErrorBody = (s: SchemaObject | ReferenceObject | undefined) => !!s && '$ref' in s && s.$ref === '#/components/schemas/ErrorBodyDto';

/** An error as Fastify raises it before a route runs (the exception filter words it). */
const fastifyError = (statusCode: number, code: string) => Object.assign(new Error(code), { statusCode, code });

/**
 * The answers of the HTTP layer before any route runs, documented on every
 * operation they can happen to: 413 and 415 wherever a body may be sent (every
 * method but GET and HEAD), 414 wherever there is a path parameter. Each with
 * its example, as the exception filter words it. Run on the built document.
 */
export function addTransportErrors(doc: OpenAPIObject): void {
  const error = (description: string, err: Error, summary: string): ResponseObject => {
    const example = errorExample(err, summary);
    const code = (example.value as { error: string }).error;
    return { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorBodyDto' }, examples: { [code]: example } } } };
  };
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item) as Array<[string, OperationObject]>) {
      if (!op?.responses) continue;
      if (method !== 'get' && method !== 'head') {
        op.responses['413'] ??= error('The body is over the size limit', fastifyError(413, 'FST_ERR_CTP_BODY_TOO_LARGE'), 'A body over the size limit');
        op.responses['415'] ??= error('A body that is not application/json, or has a Content-Encoding', unsupportedMediaType(), 'A text/plain body');
      }
      if (/\{[^}]+\}/.test(path)) {
        op.responses['414'] ??= error(
          'A path parameter is longer than 512 characters',
          fastifyError(414, 'FST_ERR_MAX_PARAM_LENGTH'),
          'A path parameter of 513 characters',
        );
      }
    }
  }
}
