import { plainToInstance } from 'class-transformer';
import { getMetadataStorage, validateSync } from 'class-validator';
import { ConfigError } from './config.error';

/** The environment a configuration is read from (`process.env`, or a test's own). */
export type Env = NodeJS.ProcessEnv;

/** A schema of environment variables: a class whose class-validator properties are named exactly as the variables. */
export type EnvSchemaClass<S extends object> = new () => S;

/** `@Transform` for integers: empty is unset, digits become a number, anything else is left for `@IsInt` to refuse. */
export const toInt = ({ value }: { value: unknown }) =>
  value === undefined || value === '' ? undefined : /^-?\d+$/.test(String(value)) ? Number(value) : value;

/** `@Transform` for booleans: 1/true/yes/on and 0/false/no/off (any case); empty is unset. */
export const toBool = ({ value }: { value: unknown }) => {
  if (value === undefined || value === '') return undefined;
  const v = String(value).toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  return value;
};

/** `@Transform` for strings: empty is unset. */
export const emptyToUndefined = ({ value }: { value: unknown }) => (value === '' ? undefined : value);

/**
 * Validates `env` against `schema` and returns the converted settings.
 * Throws `ConfigError` naming the first bad variable (in declaration order).
 */
export function validateEnv<S extends object>(schema: EnvSchemaClass<S>, env: Env): S {
  const parsed = plainToInstance(schema, { ...env }, { excludeExtraneousValues: false });
  const errors = validateSync(parsed, { whitelist: false, forbidUnknownValues: false });
  if (errors.length > 0) {
    const e = errors[0];
    // class-validator messages start with the property name; strip it so ours does exactly once.
    // Reversed: the type check (declared last) reads better first than a range check.
    const msgs = Object.values(e.constraints ?? {})
      .map((m) => (m.startsWith(e.property) ? m.slice(e.property.length).trim() : m))
      .reverse();
    throw new ConfigError(e.property, msgs.join('; ') || 'is invalid');
  }
  return parsed;
}

/** The variables a schema declares, in declaration order. */
export function envVariables(schema: EnvSchemaClass<object>): string[] {
  const names = getMetadataStorage()
    .getTargetValidationMetadatas(schema, '', true, false)
    .map((m) => m.propertyName);
  return [...new Set(names)];
}
