import { TransformationType, type TransformFnParams, type TransformMetadata } from 'class-transformer';
import type { MetadataStorage as TransformerMetadata } from 'class-transformer/types/MetadataStorage';
import { getMetadataStorage, ValidationTypes, type ValidationArguments, type ValidatorConstraintInterface } from 'class-validator';
import type { ValidationMetadata } from 'class-validator/types/metadata/ValidationMetadata';

// class-transformer's decorator registry (its own module; the package root does not re-export it).
const { defaultMetadataStorage } = require('class-transformer/cjs/storage') as { defaultMetadataStorage: TransformerMetadata };

/**
 * A fast path for request bodies, derived from each DTO's own class-validator
 * decorators: the same constraint functions, run directly on the parsed JSON,
 * without class-transformer's copy or class-validator's error objects. It can
 * only say "valid": a body it refuses goes through class-validator as usual,
 * so every 400 keeps the exact body class-validator gives it.
 *
 * It agrees with class-validator because it calls the very constraints the
 * decorators registered, under the same rules the global pipe sets (whitelist +
 * forbidNonWhitelisted, forbidUnknownValues, no implicit conversion). A
 * property's declared value conversion (`@QueryInt()`, see valueConversion) is
 * applied first, as class-transformer applies it. A DTO that uses anything it
 * does not model (groups, async or promise validation, other class-transformer
 * transforms, property defaults, nested values without `@Type`) gets no fast
 * path and always takes class-validator's road.
 */
export type FastPath = (value: unknown) => boolean;

/** A DTO class, as Nest's metadata and class-validator's storage see it. */
// eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
type Class = Function;

/** One property's checks, in class-validator's order. */
interface PropertyCheck {
  name: string;
  /** `@ValidateIf` / `@IsOptionalField` conditions: all must hold for any rule to run. */
  conditions: ((object: object, value: unknown) => boolean)[];
  /** `@IsDefined`, then every other constraint. */
  constraints: { rule: ValidatorConstraintInterface; meta: ValidationMetadata; args: ValidationArguments }[];
  /** The class of a `@ValidateNested()` value (one object, or each element of an array). */
  nested?: FastPath;
  /** A value conversion the DTO declares on the property (`@QueryInt()`), applied before any rule, as class-transformer would. */
  convert?: (params: TransformFnParams) => unknown;
}

/** A compiled DTO: the object to hand on (the value itself, or a copy with its conversions done), undefined if refused. */
interface Compiled {
  run: (value: unknown) => Record<string, unknown> | undefined;
  /** Whether it converts any property (then `run` hands on a copy). */
  converts: boolean;
}

/**
 * `@Transform` functions that only convert the value they are given (no key, object or options read, nothing kept):
 * the fast path applies them itself. Any other transform leaves its DTO to class-transformer.
 */
const VALUE_CONVERSIONS = new WeakSet<object>();

/** Declares `fn`, a `@Transform` function, a pure conversion of its `value` (see VALUE_CONVERSIONS). */
export function valueConversion<F extends (params: TransformFnParams) => unknown>(fn: F): F {
  VALUE_CONVERSIONS.add(fn);
  return fn;
}

const compiled = new WeakMap<object, { compiled: Compiled; test: FastPath } | null>();

function compiledFor(metatype: unknown): { compiled: Compiled; test: FastPath } | undefined {
  if (typeof metatype !== 'function') return undefined;
  let entry = compiled.get(metatype);
  if (entry === undefined) {
    const c = compile(metatype, new Set());
    entry = c ? { compiled: c, test: (value: unknown) => c.run(value) !== undefined } : null;
    compiled.set(metatype, entry);
  }
  return entry ?? undefined;
}

/** The fast-path validator of a DTO class, or undefined when the class must always go through class-validator. */
export function fastPathFor(metatype: unknown): FastPath | undefined {
  return compiledFor(metatype)?.test;
}

/**
 * What the validation pipe hands on for `value` under the DTO's rules: the value itself when it passes (a copy with
 * the DTO's value conversions done, for a DTO that declares any), or undefined when only class-validator can tell
 * (the value breaks a rule, or the class has no fast path).
 */
export function fastPathValue(metatype: unknown, value: unknown): Record<string, unknown> | undefined {
  return compiledFor(metatype)?.compiled.run(value);
}

const MODELLED = new Set<string>([
  ValidationTypes.CUSTOM_VALIDATION,
  ValidationTypes.IS_DEFINED,
  ValidationTypes.CONDITIONAL_VALIDATION,
  ValidationTypes.NESTED_VALIDATION,
  ValidationTypes.WHITELIST,
]);

function compile(cls: Class, seen: Set<Class>): Compiled | undefined {
  if (seen.has(cls)) return undefined; // a recursive DTO: leave it to class-validator
  seen.add(cls);
  const storage = getMetadataStorage();
  const metas = storage.getTargetValidationMetadatas(cls, '', true, false);
  // forbidUnknownValues refuses an object whose class has no rules at all.
  if (metas.length === 0) return undefined;
  if (!isPlainDataClass(cls)) return undefined;
  const byProperty = new Map<string, ValidationMetadata[]>();
  for (const m of metas) {
    if (!MODELLED.has(m.type) || (m.groups && m.groups.length > 0) || typeof m.target !== 'function') return undefined;
    byProperty.set(m.propertyName, [...(byProperty.get(m.propertyName) ?? []), m]);
  }
  const checks: PropertyCheck[] = [];
  for (const [name, list] of byProperty) {
    const check = compileProperty(cls, name, list, seen);
    if (!check) return undefined;
    checks.push(check);
  }
  const known = new Set(byProperty.keys());
  const conversions = checks.filter((c) => c.convert);
  const run = (value: unknown): Record<string, unknown> | undefined => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    let object = value as Record<string, unknown>;
    for (const key in object) if (!known.has(key)) return undefined; // whitelist + forbidNonWhitelisted
    if (conversions.length > 0) {
      // class-transformer converts the properties the value has (an absent one stays absent), then the rules see the result.
      const source = object;
      object = { ...source };
      for (const c of conversions)
        if (Object.prototype.hasOwnProperty.call(source, c.name))
          object[c.name] = c.convert!({ value: source[c.name], key: c.name, obj: source, type: TransformationType.PLAIN_TO_CLASS, options: {} });
    }
    for (const check of checks) if (!propertyPasses(check, object)) return undefined;
    return object;
  };
  return { run, converts: conversions.length > 0 };
}

function compileProperty(cls: Class, name: string, list: ValidationMetadata[], seen: Set<Class>): PropertyCheck | undefined {
  const storage = getMetadataStorage();
  // class-transformer must hand the value over untouched (or, for a nested value, make it the declared class), or
  // convert it by one declared value conversion.
  const transforms = defaultMetadataStorage.findTransformMetadatas(cls, name, TransformationType.PLAIN_TO_CLASS);
  const conversion = transforms.length === 1 && isPlainConversion(transforms[0]) ? transforms[0].transformFn : undefined;
  if (transforms.length > 0 && !conversion) return undefined;
  if (defaultMetadataStorage.findExposeMetadata(cls, name) || defaultMetadataStorage.findExcludeMetadata(cls, name)) return undefined;
  const check: PropertyCheck = { name, conditions: [], constraints: [], convert: conversion };
  const defined = list.filter((m) => m.type === ValidationTypes.IS_DEFINED);
  const custom = list.filter((m) => m.type === ValidationTypes.CUSTOM_VALIDATION);
  for (const m of [...defined, ...custom]) {
    for (const c of storage.getTargetValidatorConstraints(m.constraintCls)) {
      if (c.async || !c.instance) return undefined;
      // The arguments a rule is called with, made once: each call fills in the object and value (no rule keeps them).
      const args: ValidationArguments = { targetName: cls.name, property: name, object: {}, value: undefined, constraints: m.constraints };
      check.constraints.push({ rule: c.instance, meta: m, args });
    }
  }
  for (const m of list)
    if (m.type === ValidationTypes.CONDITIONAL_VALIDATION) check.conditions.push(m.constraints[0] as (object: object, value: unknown) => boolean);
  const type = defaultMetadataStorage.findTypeMetadata(cls, name);
  const validatesNested = list.some((m) => m.type === ValidationTypes.NESTED_VALIDATION);
  // @Type without @ValidateNested converts the value (e.g. to a Date) before class-validator sees it.
  if (type && !validatesNested) return undefined;
  if (validatesNested) {
    if (!type || type.options?.discriminator) return undefined;
    const nestedClass = type.typeFunction() as Class;
    const nested = typeof nestedClass === 'function' ? compile(nestedClass, new Set(seen)) : undefined;
    // A nested value converted on the way in would have to be rebuilt in its parent: left to class-transformer.
    if (!nested || nested.converts) return undefined;
    check.nested = (item: unknown) => nested.run(item) !== undefined;
  }
  return check;
}

/** class-validator's performValidations for one property, answering only whether it passes. */
function propertyPasses(check: PropertyCheck, object: Record<string, unknown>): boolean {
  const value = object[check.name];
  for (const condition of check.conditions) if (!condition(object, value)) return true;
  for (const { rule, meta, args } of check.constraints) {
    args.object = object;
    args.value = value;
    if (meta.each && (Array.isArray(value) || value instanceof Set || value instanceof Map)) {
      for (const item of value instanceof Map ? value.values() : value) if (rule.validate(item, { ...args, value: item }) !== true) return false;
    } else if (rule.validate(value, args) !== true) {
      return false;
    }
  }
  if (check.nested && value !== undefined) {
    // class-validator validates each element of an array as the nested class, or the one object.
    if (Array.isArray(value)) return value.every((item) => check.nested!(item));
    return check.nested(value);
  }
  return true;
}

/** A transform the fast path may apply: a declared value conversion, with no groups or versions that would limit it. */
function isPlainConversion(t: TransformMetadata): boolean {
  const o = t.options ?? {};
  return VALUE_CONVERSIONS.has(t.transformFn) && !o.groups?.length && o.since === undefined && o.until === undefined && !o.toPlainOnly;
}

/** A DTO whose fields start undefined (no defaults): handing on the parsed object loses nothing. */
function isPlainDataClass(cls: Class): boolean {
  try {
    return Object.values(new (cls as new () => object)()).every((v) => v === undefined);
  } catch {
    return false;
  }
}
