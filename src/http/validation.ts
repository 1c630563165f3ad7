import { ArgumentMetadata, ValidationError, ValidationPipe, type ValidationPipeOptions } from '@nestjs/common';
import { Transform } from 'class-transformer';
import { ApiError } from './api-error';
import { fastPathFor } from './fast-path';

export interface FieldError {
  field: string;
  errors: string[];
}

/** Flattens nested class-validator errors to `[{field: 'a.b[0].c', errors}]`. */
export function flattenValidationErrors(errors: ValidationError[], parent = ''): FieldError[] {
  return errors.flatMap((e) => {
    const field = parent ? (/^\d+$/.test(e.property) ? `${parent}[${e.property}]` : `${parent}.${e.property}`) : e.property;
    const own = e.constraints ? [{ field, errors: Object.values(e.constraints) }] : [];
    return [...own, ...flattenValidationErrors(e.children ?? [], field)];
  });
}

/**
 * class-validator's pipe, after a body DTO's `@FastPath` schema: a body the
 * schema accepts is valid under the DTO's rules too, so it is passed on as the
 * DTO without running class-validator. Anything else takes the usual road.
 */
class FastPathValidationPipe extends ValidationPipe {
  override transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    const fast = metadata.type === 'body' ? fastPathFor(metadata.metatype) : undefined;
    // Passed on as the parsed object: DTOs are plain data, nothing relies on their prototype.
    if (fast && fast(value)) return Promise.resolve(value);
    return super.transform(value, metadata) as Promise<unknown>;
  }
}

/**
 * The global pipe: unknown fields are rejected, payloads become DTO instances
 * (types transformed), and every failure is a 400 naming the fields.
 */
export function createValidationPipe(): ValidationPipe {
  return new FastPathValidationPipe(validationPipeOptions());
}

/** class-validator's side of the global pipe. */
export function validationPipeOptions(): ValidationPipeOptions {
  return {
    whitelist: true,
    forbidNonWhitelisted: true,
    forbidUnknownValues: true,
    transform: true,
    transformOptions: { enableImplicitConversion: false },
    validationError: { target: false, value: false },
    exceptionFactory: (errors) => {
      const details = flattenValidationErrors(errors);
      const message = details.map((d) => d.errors.join(', ')).join('; ') || 'Validation failed';
      return new ApiError(400, 'VALIDATION_FAILED', message, details);
    },
  };
}

/**
 * For integer query parameters: only plain decimal digits become a number;
 * anything else ("0x10", "1e1", " 5") stays a string and fails @IsInt().
 */
export const QueryInt = () =>
  Transform(({ value }: { value: unknown }) => (typeof value === 'string' && /^-?\d{1,15}$/.test(value) ? Number(value) : value));
