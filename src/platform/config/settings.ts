import type { Type } from '@nestjs/common';
import type { ConfigSliceSpec } from './config-slice';
import type { EnvSchemaClass } from './env-validation';

interface Declared {
  variable: string;
  setting: string;
  fallback: number;
  factor: number;
}

const declared = new Map<object, Declared[]>();

/**
 * On a number variable of an env schema: the setting of the built settings (`T`) it makes, its value when the
 * variable is unset, and the factor to the setting's unit (e.g. 1000 for a variable in seconds and a setting in ms).
 */
export const Setting =
  <T>(setting: keyof T & string, fallback: number, factor = 1) =>
  (target: object, variable: string): void => {
    const list = declared.get(target.constructor) ?? [];
    list.push({ variable, setting, fallback, factor });
    declared.set(target.constructor, list);
  };

/** Builds a slice's settings from its validated variables, as each variable's `@Setting` says. */
export const settingsOf =
  <T, S extends object>(schema: EnvSchemaClass<S>) =>
  (s: S): T =>
    Object.fromEntries(
      (declared.get(schema) ?? []).map(({ variable, setting, fallback, factor }) => [
        setting,
        ((s as Record<string, number | undefined>)[variable] ?? fallback) * factor,
      ]),
    ) as T;

/** The spec of a slice whose settings are all made by its variables' `@Setting`s. */
export const settingsSlice = <S extends object, T>(name: string, token: Type<T>, schema: EnvSchemaClass<S>): ConfigSliceSpec<S, T> => ({
  name,
  token,
  schema,
  build: settingsOf<T, S>(schema),
});
