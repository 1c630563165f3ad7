import type { FactoryProvider, Type } from '@nestjs/common';
import { AppConfig } from './app-config';
import { type Env, type EnvSchemaClass, envVariables, validateEnv } from './env-validation';

/**
 * One module's own settings: its environment variables (a class-validator
 * schema), and the typed settings built from them. Defined once per module in
 * `src/<module>/<module>.config.ts` with `defineConfigSlice`; `loadConfig`
 * validates every defined slice at boot, so the shared config knows none of them.
 */
export interface ConfigSlice<T> {
  /** Unique among slices, e.g. `orders`. */
  readonly name: string;
  /** The injection token of the built settings (a class used as a type, like `AppConfig`). */
  readonly token: Type<T>;
  /** The slice's variables, named exactly as in the environment. */
  readonly schema: EnvSchemaClass<object>;
  /** Validates the slice's variables in `env` and builds its settings. Throws `ConfigError` naming a bad variable. */
  load(env: Env): T;
  /**
   * The slice's settings in `config`: the ones `loadConfig` built, or (when this slice was defined
   * after `loadConfig` ran, e.g. a script that loads the config before the module) built now from
   * the environment `config` was loaded from.
   */
  of(config: AppConfig): T;
  /** Provides `token` from the configuration `loadConfig` built at boot: list it in the module's `providers`. */
  readonly provider: FactoryProvider<T>;
}

export interface ConfigSliceSpec<S extends object, T> {
  name: string;
  token: Type<T>;
  schema: EnvSchemaClass<S>;
  /** Builds the typed settings from the validated variables (defaults are applied here). */
  build(settings: S): T;
}

const defined: ConfigSlice<unknown>[] = [];

/**
 * Defines a module's configuration slice and adds it to the slices `loadConfig`
 * validates. Throws when the name, or one of the variables, is already another slice's.
 */
export function defineConfigSlice<S extends object, T>(spec: ConfigSliceSpec<S, T>): ConfigSlice<T> {
  const { name, token, schema, build } = spec;
  if (defined.some((s) => s.name === name)) throw new Error(`configuration slice "${name}" is defined twice`);
  for (const variable of envVariables(schema)) {
    const owner = defined.find((s) => envVariables(s.schema).includes(variable));
    if (owner) throw new Error(`${variable} is declared by both the "${owner.name}" and the "${name}" configuration slices`);
  }
  const load = (env: Env) => build(validateEnv(schema, env));
  const of = (config: AppConfig) => {
    if (!config.slices.has(name)) config.slices.set(name, load(config.source));
    return config.slices.get(name) as T;
  };
  const slice: ConfigSlice<T> = { name, token, schema, load, of, provider: { provide: token, useFactory: of, inject: [AppConfig] } };
  defined.push(slice as ConfigSlice<unknown>);
  return slice;
}

/** Every slice defined so far (each module's `*.config.ts` defines its own when imported). */
export function configSlices(): readonly ConfigSlice<unknown>[] {
  return [...defined];
}

/** True for a value returned by `defineConfigSlice`. */
export function isConfigSlice(value: unknown): value is ConfigSlice<unknown> {
  return defined.includes(value as ConfigSlice<unknown>);
}
