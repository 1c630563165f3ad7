import { ArgumentMetadata, type PipeTransform, ValidationError, ValidationPipe, type ValidationPipeOptions } from '@nestjs/common';
import { Transform } from 'class-transformer';
import { InvalidArgumentError } from '../core/domain.error';
import { ApiError, boundedName, fieldError, listedMessage, MAX_ERROR_DETAILS } from './api.error';
import { fastPathFor, fastPathValue, valueConversion } from './fast-path';

export interface FieldError {
  field: string;
  errors: string[];
}

/**
 * Flattens nested class-validator errors to `[{field: 'a.b[0].c', errors}]`.
 * A field that is missing altogether is "required" and a `null` one "must not
 * be null", rather than every rule it fails.
 */
export function flattenValidationErrors(errors: ValidationError[], parent = ''): FieldError[] {
  return errors.flatMap((e) => {
    const property = boundedName(e.property);
    const field = parent ? (/^\d+$/.test(property) ? `${parent}[${property}]` : `${parent}.${property}`) : property;
    const own = e.constraints ? byElement(field, ownErrors(e, field)) : [];
    // A value of the wrong type (an object where an array goes) is that one error: the nested class's fields were
    // never the caller's (`products: {}` is not missing `products.title`).
    if (wrongTypeChecks(e).length > 0) return own;
    return [...own, ...flattenValidationErrors(e.children ?? [], field)];
  });
}

/**
 * One entry per field: an error about one element of an array (`products[0] must be an object`, from an `each` rule
 * on the array) is filed under that element, as the element's own errors are.
 */
function byElement(field: string, errors: string[]): FieldError[] {
  const out = new Map<string, string[]>();
  for (const message of errors) {
    const element = message.startsWith(`${field}[`) ? /^[^\s]*?\[\d+\](?=\s)/.exec(message)?.[0] : undefined;
    const at = element ?? field;
    out.set(at, [...(out.get(at) ?? []), message]);
  }
  return [...out].map(([f, errs]) => ({ field: f, errors: errs }));
}

/** The constraints that check a value's JSON type, each with the test of that type. */
const TYPE_CHECKS: Record<string, (value: unknown) => boolean> = {
  isInt: (v) => typeof v === 'number',
  isNumber: (v) => typeof v === 'number',
  isString: (v) => typeof v === 'string',
  isBoolean: (v) => typeof v === 'boolean',
  isArray: (v) => Array.isArray(v),
};

function ownErrors(e: ValidationError, field: string): string[] {
  const constraints = e.constraints ?? {};
  // An unknown field keeps its "should not exist", whatever its value.
  if (constraints.whitelistValidation) return [`property ${boundedName(e.property)} should not exist`];
  // An array element is named with its array (`lines[1]`), not as a bare index.
  const name = /^\d+$/.test(e.property) ? field : e.property;
  if (e.value === undefined && 'value' in e) return [`${name} is required`];
  if (e.value === null) return [`${name} must not be null`];
  // A value of the wrong type ("100" for a number) is told its type only: the ranges and formats it also "broke" were never about it.
  const wrongType = wrongTypeChecks(e);
  if (wrongType.length > 0) return wrongType.map((c) => constraints[c]);
  return Object.values(constraints);
}

/** The type checks (isArray, isInt…) a present value fails. */
function wrongTypeChecks(e: ValidationError): string[] {
  if (!e.constraints || !('value' in e) || e.value === undefined || e.value === null) return [];
  return Object.keys(e.constraints).filter((c) => TYPE_CHECKS[c]?.(e.value) === false);
}

/**
 * class-validator's pipe, after the DTO's fast path (fast-path.ts): a body,
 * path or query object the fast path accepts is valid under the DTO's rules,
 * so it is passed on without class-transformer and class-validator. Anything
 * else takes the usual road, which words the 400.
 */
class FastPathValidationPipe implements PipeTransform {
  private readonly classValidator = new ValidationPipe(validationPipeOptions());

  transform(value: unknown, metadata: ArgumentMetadata): unknown {
    // A custom parameter decorator's value (e.g. @CurrentCaller()) is not validated (validateCustomDecorators is off):
    // handed on as Nest's pipe would, without its async round.
    if (metadata.type === 'custom') return value;
    if (isDtoClass(metadata.metatype)) {
      // Nest's pipe would turn a `null` or missing body into `{}`, and validate an array as one object.
      if (metadata.type === 'body' && (typeof value !== 'object' || value === null || Array.isArray(value))) return Promise.reject(bodyNotObject());
      if (metadata.type === 'param') {
        const dots = dotSegment(value);
        if (dots) return Promise.reject(dots);
      }
      // Passed on as the parsed object (its declared conversions done): DTOs are plain data, nothing relies on their prototype.
      const valid = fastPathValue(metadata.metatype, value);
      if (valid) return valid;
      // No query parameter is a list: one given twice (`?limit=1&limit=2`) is named once, not by every rule it breaks.
      if (metadata.type === 'query') {
        const repeated = repeatedField(value);
        if (repeated) return Promise.reject(repeated);
      }
    }
    return this.classValidator.transform(value, metadata);
  }
}

const PRIMITIVES: unknown[] = [String, Number, Boolean, Object, Array];
const isDtoClass = (metatype: unknown): boolean => typeof metatype === 'function' && !PRIMITIVES.includes(metatype);
/**
 * `.` and `..` are path segments, not ids: clients and proxies resolve them
 * (`/locks/../acquire` reaches us as `/acquire` from most of them), so a
 * resource named that way could be created but never addressed reliably.
 */
function dotSegment(params: unknown): ApiError | undefined {
  if (typeof params !== 'object' || params === null) return undefined;
  for (const [field, v] of Object.entries(params)) {
    if (v === '.' || v === '..') return fieldError(field, `${field} must not be "." or ".."`);
  }
  return undefined;
}

function repeatedField(query: unknown): ApiError | undefined {
  if (typeof query !== 'object' || query === null) return undefined;
  for (const [field, v] of Object.entries(query)) {
    if (Array.isArray(v)) return fieldError(boundedName(field), `${boundedName(field)} must be given once`);
  }
  return undefined;
}

const bodyNotObject = () => fieldError('body', 'Request body must be a JSON object');

/**
 * The global pipe: unknown fields are rejected, and every failure is a 400
 * naming the fields. Values the fast path accepts are handed on as parsed;
 * the others become DTO instances (types transformed) through class-validator.
 */
export function createValidationPipe(): PipeTransform {
  return new FastPathValidationPipe();
}

/** class-validator's side of the global pipe. */
export function validationPipeOptions(): ValidationPipeOptions {
  return {
    whitelist: true,
    forbidNonWhitelisted: true,
    forbidUnknownValues: true,
    transform: true,
    transformOptions: { enableImplicitConversion: false },
    // Values are read to tell a missing or null field apart, and never copied into the response.
    validationError: { target: false, value: true },
    // However many fields fail (thousands of unknown ones fit in a body), the answer stays small: the message lists
    // what fits in 500 characters and counts the rest, and details names the first MAX_ERROR_DETAILS fields.
    exceptionFactory: (errors) => {
      const all = flattenValidationErrors(errors);
      const message = listedMessage(all.map((d) => d.errors.join(', '))) || 'Validation failed';
      return new ApiError(400, 'VALIDATION_FAILED', message, all.slice(0, MAX_ERROR_DETAILS));
    },
  };
}

const commandPipe = new FastPathValidationPipe();

/**
 * Checks an in-process caller's command by a DTO class, through the global pipe itself: the same rules and
 * options (unknown fields refused, no implicit conversion), the fast path first. A bad command is an
 * InvalidArgumentError (400 VALIDATION_FAILED) with the message and field details an HTTP body would get.
 * The command is not changed; nothing is stored by the caller before this passes.
 */
// eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
export async function validateCommand(dto: Function, command: object): Promise<void> {
  // The pipe's own first step, without its dispatch: most commands are sound.
  if (fastPathFor(dto)?.(command)) return;
  try {
    await commandPipe.transform(command, { type: 'body', metatype: dto as ArgumentMetadata['metatype'] });
  } catch (err) {
    if (err instanceof ApiError && err.code === 'VALIDATION_FAILED') throw new InvalidArgumentError(err.message, err.details as FieldError[]);
    throw err;
  }
}

/** QueryInt's conversion: it reads only the value, so the fast path applies it too (see valueConversion). */
const queryInt = valueConversion(({ value }: { value: unknown }) => (typeof value === 'string' && /^-?\d{1,15}$/.test(value) ? Number(value) : value));

/**
 * For integer query parameters: only plain decimal digits become a number;
 * anything else ("0x10", "1e1", " 5") stays a string and fails @IsInt().
 */
export const QueryInt = () => Transform(queryInt);
