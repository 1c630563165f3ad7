import type { INestApplication, Type } from '@nestjs/common';
import type { OpenAPIObject, ParameterObject, ReferenceObject, SchemaObject } from '@nestjs/swagger';
import { getMetadataStorage } from 'class-validator';
import type { ValidationMetadata } from 'class-validator/types/metadata/ValidationMetadata';
import { routeInputs } from './error-examples';

// class-transformer's decorator registry (its own module; the package root does not re-export it).
const { defaultMetadataStorage } = require('class-transformer/cjs/storage') as {
  defaultMetadataStorage: { findTypeMetadata(target: unknown, property: string): { typeFunction(): unknown } | undefined };
};

/**
 * Puts into the OpenAPI document two rules the validation pipe enforces that
 * the Swagger plugin leaves out: `@IsInt()` is `type: integer` (the plugin
 * writes `number`, so 1.5 looked valid), and a field's one `@Matches()` is its
 * `pattern` (ids documented as any string up to maxLength were refused for
 * their characters). Body schemas (and the schemas nested in them) and the
 * path and query parameters of every route. Run on the built document.
 */
export function addValidationRules(doc: OpenAPIObject, app: INestApplication): void {
  const inputs = routeInputs(app);
  const bodies = new Map<string, Type>();
  const addBody = (cls: Type | undefined) => {
    if (!cls || bodies.has(cls.name)) return;
    bodies.set(cls.name, cls);
    for (const m of rulesOf(cls)) {
      if (m.type !== 'nestedValidation') continue;
      const nested = defaultMetadataStorage.findTypeMetadata(cls, m.propertyName)?.typeFunction();
      if (typeof nested === 'function') addBody(nested as Type);
    }
  };
  for (const { body } of inputs.values()) addBody(body);
  for (const [name, cls] of bodies) {
    const schema = doc.components?.schemas?.[name] as SchemaObject | undefined;
    for (const [property, s] of Object.entries(schema?.properties ?? {})) applyRules(s, rulesOf(cls, property));
  }
  for (const item of Object.values(doc.paths)) {
    for (const op of Object.values(item) as Array<{ operationId?: string; parameters?: Array<ParameterObject | ReferenceObject> }>) {
      const route = inputs.get(op?.operationId ?? '');
      if (!route) continue;
      for (const p of op.parameters ?? []) {
        if ('$ref' in p || !p.schema) continue;
        const cls = p.in === 'path' ? route.path : p.in === 'query' ? route.query : undefined;
        if (cls) applyRules(p.schema, rulesOf(cls, p.name));
      }
    }
  }
}

function rulesOf(cls: Type, property?: string): ValidationMetadata[] {
  const all = getMetadataStorage().getTargetValidationMetadatas(cls, '', true, false);
  return property === undefined ? all : all.filter((m) => m.propertyName === property);
}

function applyRules(s: SchemaObject | ReferenceObject, rules: ValidationMetadata[]): void {
  if ('$ref' in s) return;
  const named = (name: string) => rules.filter((m) => m.name === name && !m.each);
  if (s.type === 'number' && named('isInt').length > 0) s.type = 'integer';
  const matches = named('matches');
  const re = matches.length === 1 ? matches[0].constraints?.[0] : undefined;
  // Only a plain ECMAScript pattern means the same in the document; flags (i, m, s...) would change it.
  if (re instanceof RegExp && re.flags === '' && s.pattern === undefined && (s.type === 'string' || s.type === undefined)) s.pattern = re.source;
}
