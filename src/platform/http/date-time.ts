import { ApiProperty, type OpenAPIObject, type SchemaObject } from '@nestjs/swagger';
import { IsISO8601, Matches } from 'class-validator';

/**
 * A calendar date and time with a zone: IsISO8601 strict also allows a bare date, and week and ordinal dates
 * (2026-W48-3, 2026-332), which Date.parse cannot read.
 */
export const DATE_TIME_RE = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,9})?)?(Z|[+-]\d\d:\d\d)$/;

/** A body field holding an ISO 8601 date and time with a time zone; the 400 names `field`. */
export const IsDateTime =
  (field: string) =>
  (target: object, key: string): void => {
    IsISO8601({ strict: true })(target, key);
    Matches(DATE_TIME_RE, { message: `${field} must be a date and time with a time zone, e.g. 2026-11-25T10:00:00+08:00` })(target, key);
  };

/** The date-time fields documented as a time from now: schema (class) name → property → milliseconds from now. */
const EXAMPLES_FROM_NOW = new Map<string, Map<string, number>>();

const isoAt = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toISOString();

/**
 * Documents a date-time field's example as `fromNowMs` from the moment the OpenAPI document is served (see
 * `withExamplesFromNow`): a fixed date works only until it has passed (a sale's example that ended last week).
 */
export const ExampleFromNow =
  (fromNowMs: number) =>
  (target: object, key: string): void => {
    const name = target.constructor.name;
    EXAMPLES_FROM_NOW.set(name, (EXAMPLES_FROM_NOW.get(name) ?? new Map<string, number>()).set(key, fromNowMs));
    ApiProperty({ example: isoAt(Date.now() + fromNowMs) })(target, key);
  };

/** The document with every `ExampleFromNow` example set from `now` (a copy: the document itself is left as it is). */
export function withExamplesFromNow(document: OpenAPIObject, now = Date.now()): OpenAPIObject {
  const schemas = { ...document.components?.schemas };
  for (const [name, fields] of EXAMPLES_FROM_NOW) {
    const schema = schemas[name] as SchemaObject | undefined;
    if (!schema?.properties) continue;
    const properties = { ...schema.properties };
    for (const [key, fromNowMs] of fields) properties[key] = { ...(properties[key] as SchemaObject), example: isoAt(now + fromNowMs) };
    schemas[name] = { ...schema, properties };
  }
  return { ...document, components: { ...document.components, schemas } };
}
