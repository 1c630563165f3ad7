import { ValidationError, ValidationPipe } from '@nestjs/common';
import { Transform } from 'class-transformer';
import { ApiError } from './api-error';

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
 * The global pipe: unknown fields are rejected, payloads become DTO instances
 * (types transformed), and every failure is a 400 naming the fields.
 */
export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
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
  });
}

/**
 * For integer query parameters: only plain decimal digits become a number;
 * anything else ("0x10", "1e1", " 5") stays a string and fails @IsInt().
 */
export const QueryInt = () =>
  Transform(({ value }: { value: unknown }) => (typeof value === 'string' && /^-?\d{1,15}$/.test(value) ? Number(value) : value));
