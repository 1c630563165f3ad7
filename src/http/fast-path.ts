import Ajv, { type ValidateFunction } from 'ajv';
import { isISO8601 } from 'class-validator';

/**
 * A fast path for hot request bodies: a JSON schema, compiled by ajv, that
 * accepts only bodies the DTO's class-validator rules also accept. The global
 * pipe (`createValidationPipe`) tries it first; a body it passes skips
 * class-transformer and class-validator (about 30 µs per request). A body it
 * refuses goes through class-validator as usual, so every 400 keeps the exact
 * body class-validator gives it: the fast path can only say "yes, valid".
 *
 * The schema must never be looser than the DTO; `fast-path.spec.ts` checks
 * each registered schema against class-validator on generated bodies.
 */
const ajv = new Ajv({
  allErrors: false,
  // Patterns as plain JavaScript RegExps, like @Matches. (Lengths: ajv counts
  // code points, class-validator code points less variation selectors, so
  // ajv's maxLength is the stricter of the two.)
  unicodeRegExp: false,
  strict: true,
  coerceTypes: false,
  useDefaults: false,
  removeAdditional: false,
});
ajv.addFormat('iso8601-strict', (v: string) => isISO8601(v, { strict: true }));

const registry = new WeakMap<object, ValidateFunction>();

/** Class decorator: registers `schema` as the fast path for bodies of this DTO. */
export function FastPath(schema: Record<string, unknown>): ClassDecorator {
  const validate = ajv.compile(schema);
  return (target) => {
    registry.set(target, validate);
  };
}

/** The fast-path validator of a DTO class, if it has one. */
export function fastPathFor(metatype: unknown): ValidateFunction | undefined {
  return typeof metatype === 'function' ? registry.get(metatype) : undefined;
}

/** A JSON-schema string with class-validator's `@IsString() @MaxLength(max) @Matches(re)` meaning. */
export function str(maxLength: number, pattern?: RegExp, minLength?: number): Record<string, unknown> {
  if (pattern?.flags) throw new Error(`fast-path patterns cannot carry flags: ${String(pattern)}`);
  return {
    type: 'string',
  maxLength,
    ...(minLength !== undefined ? { minLength } : {}),
    ...(pattern ? { pattern: pattern.source } : {}),
  };
}
