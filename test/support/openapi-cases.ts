import { HEADERS, SECURITY } from '../../src/platform/http/security-schemes';
import { CREDS, merchantHeaders, userToken } from './test-app';

/**
 * Malformed-request cases generated from the service's OpenAPI document: every
 * operation in `paths` gets the classes below that apply to it, so an endpoint
 * is covered the day it is documented. Only reading of the document and
 * building of requests lives here; sending them and checking the answers is
 * in test/e2e/malformed-input.e2e-spec.ts.
 */

// --- The parts of an OpenAPI 3 document read here ---------------------------------

export interface SchemaObject {
  $ref?: string;
  type?: string | string[];
  format?: string;
  enum?: unknown[];
  example?: unknown;
  default?: unknown;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  nullable?: boolean;
  properties?: Record<string, SchemaObject>;
  required?: string[];
  items?: SchemaObject;
  oneOf?: SchemaObject[];
  anyOf?: SchemaObject[];
  allOf?: SchemaObject[];
  additionalProperties?: boolean | SchemaObject;
}

export interface ParameterObject {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required?: boolean;
  example?: unknown;
  schema?: SchemaObject;
}

export interface OperationObject {
  operationId?: string;
  parameters?: ParameterObject[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: SchemaObject }> };
  security?: Array<Record<string, string[]>>;
  responses?: Record<string, unknown>;
}

export interface OpenApiDocument {
  openapi?: string;
  paths?: Record<string, Record<string, OperationObject>>;
  components?: { schemas?: Record<string, SchemaObject>; securitySchemes?: Record<string, { type: string; scheme?: string; in?: string; name?: string }> };
  security?: Array<Record<string, string[]>>;
}

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'] as const;

/** One documented operation. */
export interface Operation {
  method: string; // upper case
  path: string; // the template, e.g. /locks/{name}/acquire
  op: OperationObject;
  /** `METHOD /path`, for test names and failure lists. */
  id: string;
}

export function operationsOf(doc: OpenApiDocument): Operation[] {
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const m of HTTP_METHODS) {
      const op = item[m];
      if (op) ops.push({ method: m.toUpperCase(), path, op, id: `${m.toUpperCase()} ${path}` });
    }
  }
  return ops;
}

// --- Schemas ------------------------------------------------------------------------

export class SchemaReader {
  constructor(private readonly doc: OpenApiDocument) {}

  /** The schema with every top-level `$ref` (and a single-entry `allOf`) followed. */
  resolve(s: SchemaObject | undefined): SchemaObject | undefined {
    let cur = s;
    for (let hops = 0; cur && hops < 20; hops++) {
      if (cur.$ref) {
        const m = /^#\/components\/schemas\/(.+)$/.exec(cur.$ref);
        if (!m) throw new Error(`unsupported $ref ${cur.$ref}`);
        const next = this.doc.components?.schemas?.[decodeURIComponent(m[1])];
        if (!next) throw new Error(`dangling $ref ${cur.$ref}`);
        cur = next;
      } else if (cur.allOf?.length === 1 && !cur.properties) {
        cur = cur.allOf[0];
      } else {
        return cur;
      }
    }
    if (cur) throw new Error('$ref chain too long');
    return cur;
  }

  /** The JSON types a schema allows: string, number, boolean, object, array (integer counts as number). Empty when unknown. */
  typesOf(s: SchemaObject | undefined): Set<JsonType> {
    const r = this.resolve(s);
    const out = new Set<JsonType>();
    if (!r) return out;
    for (const t of [r.type ?? []].flat()) {
      if (t === 'integer' || t === 'number') out.add('number');
      else if (t === 'string' || t === 'boolean' || t === 'object' || t === 'array') out.add(t);
    }
    for (const alt of [...(r.oneOf ?? []), ...(r.anyOf ?? [])]) for (const t of this.typesOf(alt)) out.add(t);
    if (out.size === 0 && r.enum) for (const v of r.enum) out.add(jsonTypeOf(v));
    if (out.size === 0 && r.properties) out.add('object');
    if (out.size === 0 && r.items) out.add('array');
    return out;
  }

  /** The object schema (with properties) a schema is, or is an array of; undefined otherwise. */
  objectSchema(s: SchemaObject | undefined): SchemaObject | undefined {
    const r = this.resolve(s);
    return r?.properties ? r : undefined;
  }

  itemsOf(s: SchemaObject | undefined): SchemaObject | undefined {
    const r = this.resolve(s);
    return r && this.typesOf(r).has('array') && r.items ? r.items : undefined;
  }

  nullable(s: SchemaObject | undefined): boolean {
    const r = this.resolve(s);
    if (!r) return false;
    if (r.nullable === true || [r.type ?? []].flat().includes('null')) return true;
    return [...(r.oneOf ?? []), ...(r.anyOf ?? [])].some((alt) => this.nullable(alt));
  }

  /** A plausible valid value: the schema's example, else one generated from type, format, enum and bounds. */
  sample(s: SchemaObject | undefined, depth = 0): unknown {
    const r = this.resolve(s);
    if (!r) return 'abc123';
    if (r.example !== undefined) return r.example;
    if (r.default !== undefined) return r.default;
    if (r.enum?.length) return r.enum[0];
    const alt = r.oneOf?.[0] ?? r.anyOf?.[0];
    if (alt) return this.sample(alt, depth + 1);
    const types = this.typesOf(r);
    if (types.has('object') || r.properties) {
      const o: Record<string, unknown> = {};
      if (depth < 6) for (const [k, p] of Object.entries(r.properties ?? {})) o[k] = this.sample(p, depth + 1);
      return o;
    }
    if (types.has('array')) {
      const n = Math.max(1, r.minItems ?? 1);
      return depth < 6 ? Array.from({ length: n }, () => this.sample(r.items, depth + 1)) : [];
    }
    if (types.has('number')) {
      const t = [r.type].flat().includes('integer');
      const lo = r.minimum ?? (r.maximum !== undefined ? Math.min(0, r.maximum) : 1);
      return t ? Math.ceil(lo) : lo;
    }
    if (types.has('boolean')) return true;
    if (r.format === 'date-time') return '2026-11-22T08:30:00.000Z';
    if (r.format === 'date') return '2026-11-22';
    if (r.format === 'uri' || r.format === 'url') return 'https://example.com/x';
    if (r.format === 'email') return 'someone@example.com';
    if (r.format === 'uuid') return '3f1c0e0a-6a55-4a7e-9d1d-2f8b1c7e9a10';
    let str = 'abc123';
    if (r.maxLength !== undefined) str = str.slice(0, Math.max(r.maxLength, 0));
    if (r.minLength !== undefined && str.length < r.minLength) str = str.padEnd(r.minLength, 'x');
    return str;
  }
}

export type JsonType = 'string' | 'number' | 'boolean' | 'object' | 'array';

export function jsonTypeOf(v: unknown): JsonType {
  if (Array.isArray(v)) return 'array';
  if (v !== null && typeof v === 'object') return 'object';
  if (typeof v === 'number' || typeof v === 'bigint') return 'number';
  if (typeof v === 'boolean') return 'boolean';
  return 'string';
}

/** A value of each JSON type, chosen to look close to a right one (a numeric string, a one-element array...). */
export const WRONG_TYPE_VALUES: Record<JsonType, unknown> = {
  string: '123',
  number: 12345,
  boolean: true,
  object: { k: 'v' },
  array: ['abc'],
};

// --- Body fields ----------------------------------------------------------------------

/** A place in a request body: `['messages', 0, 'title']`. */
export type FieldPath = Array<string | number>;

/** `messages[0].title` (how the service's validation names a field). */
export function fieldName(path: FieldPath): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
}

/** The ways a response may name a field: `a.b[0].c` (never `a.b.0.c`: every 400 names indexes in brackets), or `/a/b/0/c`. */
export function fieldSpellings(path: FieldPath): string[] {
  return [...new Set([fieldName(path), '/' + path.join('/')])];
}

export interface BodyField {
  path: FieldPath;
  schema: SchemaObject;
}

/**
 * The body's fields: every top-level property, and one level in: the
 * properties of an object-valued property, the first element of an array
 * property, and the properties of that element when it is an object.
 */
export function bodyFields(reader: SchemaReader, bodySchema: SchemaObject): BodyField[] {
  const root = reader.objectSchema(bodySchema);
  if (!root) return [];
  const out: BodyField[] = [];
  for (const [name, prop] of Object.entries(root.properties ?? {})) {
    out.push({ path: [name], schema: prop });
    const inner = reader.objectSchema(prop);
    if (inner) for (const [k, s] of Object.entries(inner.properties ?? {})) out.push({ path: [name, k], schema: s });
    const items = reader.itemsOf(prop);
    if (items && !reader.resolve(prop)?.oneOf && !reader.resolve(prop)?.anyOf) {
      out.push({ path: [name, 0], schema: items });
      const itemObj = reader.objectSchema(items);
      if (itemObj) for (const [k, s] of Object.entries(itemObj.properties ?? {})) out.push({ path: [name, 0, k], schema: s });
    }
  }
  return out;
}

/** A deep copy of `body` with the value at `path` replaced (parents created as needed). */
export function setAt(body: unknown, path: FieldPath, value: unknown): unknown {
  const copy = structuredClone(body) as Record<string | number, unknown>;
  let cur: Record<string | number, unknown> = copy;
  for (const [i, key] of path.entries()) {
    if (i === path.length - 1) {
      cur[key] = value;
    } else {
      const next = cur[key];
      if (next === null || typeof next !== 'object') cur[key] = typeof path[i + 1] === 'number' ? [] : {};
      cur = cur[key] as Record<string | number, unknown>;
    }
  }
  return copy;
}

/** Whether the base body has a value at `path` (array elements and nested objects exist there). */
export function hasPath(body: unknown, path: FieldPath): boolean {
  let cur: unknown = body;
  for (const key of path.slice(0, -1)) {
    if (cur === null || typeof cur !== 'object') return false;
    cur = (cur as Record<string | number, unknown>)[key];
  }
  return cur !== null && typeof cur === 'object';
}

// --- Cases ------------------------------------------------------------------------------

export const CASE_CLASSES = [
  'body-deep-nesting',
  'body-null-field',
  'body-wrong-type',
  'body-not-object',
  'body-huge-string',
  'body-unknown-field',
  'body-edge-values',
  'body-syntax-and-content-type',
  'path-params',
  'query-params',
] as const;
export type CaseClass = (typeof CASE_CLASSES)[number];

export interface MalformedCase {
  cls: CaseClass;
  op: Operation;
  /** What is wrong, for the failure list. */
  name: string;
  /** The raw URL sent (path and query), exactly as it reaches the server. */
  url: string;
  /** The raw body sent, if any. */
  body?: string;
  /** The content type: undefined means application/json when there is a body; null means none at all. */
  contentType?: string | null;
  /** `4xx`: any 4xx in the error shape (optionally one of `statuses`); `not-5xx`: a 2xx is fine too. */
  expect: '4xx' | 'not-5xx';
  statuses?: number[];
  /** The body field the case breaks, if it breaks one. */
  field?: FieldPath;
  /** The error's message or details must name `field`. */
  names?: boolean;
  /** Long inputs the response must not echo (a 1,000-character run of any). */
  bigInputs: string[];
}

export const DEEP = 30_000;
export const NESTING = '['.repeat(DEEP) + ']'.repeat(DEEP);
export const HUGE = 100_000;
/** Placeholder replaced in the serialised body (a 30,000-deep value cannot go through JSON.stringify). */
const DEEP_MARK = '__deep_nesting_placeholder__';

export interface CaseOptions {
  /** The body limit of a route (bytes), to also send a huge string that fits under it. */
  bodyLimit(op: Operation): number;
}

/** A plausible valid value for a parameter: its example, its schema's example or enum, else 'abc123'. */
export function paramValue(reader: SchemaReader, p: ParameterObject): string {
  if (p.example !== undefined) return String(p.example);
  const s = reader.resolve(p.schema);
  if (s?.example !== undefined) return String(s.example);
  if (s?.enum?.length) return String(s.enum[0]);
  if (s?.default !== undefined) return String(s.default);
  if (reader.typesOf(s).has('number')) return String(reader.sample(s));
  return 'abc123';
}

/**
 * The URL with every path parameter at a valid value except those in `raw` (inserted as given: already
 * URL-encoded), and the required query parameters at valid values; `query`, when given, replaces the
 * parameter `query.name` with the raw query text `query.text`.
 */
export function buildUrl(reader: SchemaReader, op: Operation, raw: Record<string, string> = {}, query?: { name: string; text: string }): string {
  const params = op.op.parameters ?? [];
  const path = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    if (name in raw) return raw[name];
    const p = params.find((x) => x.in === 'path' && x.name === name);
    return encodeURIComponent(p ? paramValue(reader, p) : 'abc123');
  });
  const parts = params
    .filter((p) => p.in === 'query' && p.required && p.name !== query?.name)
    .map((p) => `${encodeURIComponent(p.name)}=${encodeURIComponent(paramValue(reader, p))}`);
  if (query) parts.push(query.text);
  return parts.length ? `${path}?${parts.join('&')}` : path;
}

/** The JSON request-body schema of an operation, if it takes one. */
export function jsonBodySchema(op: Operation): SchemaObject | undefined {
  const content = op.op.requestBody?.content ?? {};
  const key = Object.keys(content).find((k) => /^application\/(.+\+)?json\b/.test(k));
  return key ? (content[key].schema ?? {}) : undefined;
}

const huge = (n: number) => 'Z'.repeat(n);

/** Placeholder replaced by the raw JSON text of an edge value (1e309 and 2^53+1 cannot go through JSON.stringify). */
const EDGE_MARK = '__edge_value_placeholder__';
/** Date-times of the documented shape that name no instant. */
const IMPOSSIBLE_DATES = [
  '2026-02-30T10:00:00Z',
  '2026-02-29T10:00:00Z',
  '2026-12-31T23:59:60Z',
  '2026-11-25T24:00:00Z',
  '2026-13-01T00:00:00Z',
  '2026-11-25T10:00:00+24:00',
];
/** Characters that no id pattern of the API admits (each tried only where the documented pattern refuses it). */
const OUTSIDE_ID = [
  ['NUL', 'a\\u0000b'],
  ['a control character', 'a\\u0007b'],
  ['a right-to-left override', 'a\\u202eb'],
  ['a zero-width space', 'a\\u200bb'],
  ['an emoji', 'a\\ud83d\\ude00b'],
  ['a space', 'a b'],
] as const;

/**
 * Values the schema refuses, as `[label, raw JSON text]`: every one must be a 400 naming the field. Only what the
 * document itself states is used (type, bounds, maxLength, pattern, a date-time shape), so each case is one where the
 * document and the service must agree.
 */
function edgeValues(reader: SchemaReader, schema: SchemaObject, sample: unknown): Array<[string, string]> {
  const s = reader.resolve(schema);
  if (!s || s.enum || s.oneOf || s.anyOf) return [];
  const out: Array<[string, string]> = [];
  const types = [s.type ?? []].flat();
  if (types.includes('number') || types.includes('integer')) {
    out.push(['1e309 (beyond a double)', '1e309'], ['-1e309', '-1e309']);
    if (s.maximum !== undefined) {
      out.push([`maximum + 1 (${s.maximum + 1})`, String(s.maximum + 1)]);
      if (s.maximum < 2 ** 53) out.push(['2^53 + 1', '9007199254740993']);
    }
    if (s.minimum !== undefined) out.push([`minimum - 1 (${s.minimum - 1})`, String(s.minimum - 1)]);
    if (types.includes('integer')) {
      const lo = s.minimum ?? 0;
      out.push([`a fraction (${lo + 0.5})`, String(lo + 0.5)], ['1e-7', '1e-7']);
    }
  }
  if (types.includes('string')) {
    out.push(['a lone surrogate', '"a\\ud800b"']);
    const pattern = s.pattern !== undefined ? new RegExp(s.pattern) : undefined;
    if (s.maxLength !== undefined && s.maxLength < 10_000) {
      // One past maxLength, its first maxLength characters valid where possible, so only the length is wrong.
      const seed = typeof sample === 'string' ? sample : '';
      const candidates = [seed.padEnd(s.maxLength + 1, 'a'), seed.padEnd(s.maxLength + 1, '1'), 'a'.repeat(s.maxLength + 1)];
      const long = candidates.find((c) => !pattern || pattern.test(c.slice(0, s.maxLength))) ?? candidates[2];
      out.push([`maxLength + 1 (${s.maxLength + 1})`, JSON.stringify(long)]);
    }
    if (pattern) {
      for (const [label, raw] of OUTSIDE_ID) {
        const value = JSON.parse(`"${raw}"`) as string;
        if (!pattern.test(value)) out.push([label, `"${raw}"`]);
      }
      if (/\\d\{4\}-/.test(s.pattern!)) for (const d of IMPOSSIBLE_DATES) out.push([`date ${d}`, JSON.stringify(d)]);
    }
  }
  return out;
}

function formEncode(body: unknown): string {
  const o = body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : { value: body };
  return new URLSearchParams(Object.entries(o).map(([k, v]): [string, string] => [k, typeof v === 'object' ? JSON.stringify(v) : String(v)])).toString();
}

/** Every malformed case of one operation, in the order of CASE_CLASSES. */
export function casesFor(doc: OpenApiDocument, op: Operation, opts: CaseOptions): MalformedCase[] {
  const reader = new SchemaReader(doc);
  const cases: MalformedCase[] = [];
  const url = buildUrl(reader, op);
  const add = (c: Omit<MalformedCase, 'op' | 'bigInputs' | 'url'> & { url?: string; bigInputs?: string[] }) => cases.push({ op, url, bigInputs: [], ...c });

  const bodySchema = jsonBodySchema(op);
  const root = bodySchema ? reader.objectSchema(bodySchema) : undefined;
  const isObjectBody = bodySchema !== undefined && reader.typesOf(bodySchema).has('object');
  if (bodySchema !== undefined) {
    const base = reader.sample(bodySchema);
    const fields = root ? bodyFields(reader, bodySchema) : [];
    const topFields = fields.filter((f) => f.path.length === 1);
    const reachable = fields.filter((f) => hasPath(base, f.path));
    const json = (b: unknown) => JSON.stringify(b);

    // Deep nesting: an extra field holding it, then each known field holding it.
    if (isObjectBody) {
      const withDeep = (b: unknown) => json(b).replace(JSON.stringify(DEEP_MARK), NESTING);
      add({
        cls: 'body-deep-nesting',
        name: `extra field nested ${DEEP} deep`,
        body: withDeep({ ...(base as object), deepExtraField: DEEP_MARK }),
        expect: '4xx',
        statuses: [400],
        bigInputs: [NESTING],
      });
      for (const f of topFields) {
        add({
          cls: 'body-deep-nesting',
          name: `${fieldName(f.path)} nested ${DEEP} deep`,
          body: withDeep(setAt(base, f.path, DEEP_MARK)),
          expect: '4xx',
          statuses: [400],
          field: f.path,
          bigInputs: [NESTING],
        });
      }
    }

    // null in each field, unless the schema says it may be null.
    for (const f of reachable) {
      if (reader.nullable(f.schema)) continue;
      add({
        cls: 'body-null-field',
        name: `${fieldName(f.path)}: null`,
        body: json(setAt(base, f.path, null)),
        expect: '4xx',
        statuses: [400],
        field: f.path,
        names: true,
      });
    }

    // Each other JSON type in each field.
    for (const f of reachable) {
      const types = reader.typesOf(f.schema);
      if (types.size === 0) continue;
      for (const [t, v] of Object.entries(WRONG_TYPE_VALUES) as Array<[JsonType, unknown]>) {
        if (types.has(t)) continue;
        add({
          cls: 'body-wrong-type',
          name: `${fieldName(f.path)}: ${t} ${JSON.stringify(v)}`,
          body: json(setAt(base, f.path, v)),
          expect: '4xx',
          statuses: [400],
          field: f.path,
          names: true,
        });
      }
    }

    // An empty array where the schema has no array: nothing inside it to fail a rule (ValidateNested passed it).
    for (const f of reachable) {
      const types = reader.typesOf(f.schema);
      if (types.size === 0 || types.has('array')) continue;
      add({
        cls: 'body-wrong-type',
        name: `${fieldName(f.path)}: empty array []`,
        body: json(setAt(base, f.path, [])),
        expect: '4xx',
        statuses: [400],
        field: f.path,
        names: true,
      });
    }

    // Bodies that are not an object.
    if (isObjectBody) {
      for (const raw of ['null', '[]', '"x"', '1', 'true']) {
        add({ cls: 'body-not-object', name: `body ${raw}`, body: raw, expect: '4xx', statuses: [400] });
      }
    }

    // A 100,000-character string in each string field; when that is over the route's body limit, also the longest that fits.
    for (const f of reachable) {
      if (!reader.typesOf(f.schema).has('string')) continue;
      const s = huge(HUGE);
      const body = json(setAt(base, f.path, s));
      add({
        cls: 'body-huge-string',
        name: `${fieldName(f.path)}: ${HUGE} characters`,
        body,
        expect: '4xx',
        statuses: [400, 413],
        field: f.path,
        bigInputs: [s],
      });
      const limit = opts.bodyLimit(op);
      if (Buffer.byteLength(body) > limit) {
        const fits = limit - Buffer.byteLength(json(setAt(base, f.path, ''))) - 16;
        if (fits >= 1000) {
          const s2 = huge(fits);
          add({
            cls: 'body-huge-string',
            name: `${fieldName(f.path)}: ${fits} characters (fits the ${limit}-byte body limit)`,
            body: json(setAt(base, f.path, s2)),
            expect: '4xx',
            statuses: [400, 413],
            field: f.path,
            bigInputs: [s2],
          });
        }
      }
    }

    // An unknown field, at the top and in each nested object the base body has.
    if (isObjectBody) {
      add({
        cls: 'body-unknown-field',
        name: 'unknown top-level field',
        body: json({ ...(base as object), unknownExtraField: 1 }),
        expect: '4xx',
        statuses: [400],
        field: ['unknownExtraField'],
        names: true,
      });
      for (const f of reachable) {
        if (!reader.objectSchema(f.schema) || !hasPath(base, [...f.path, 'x'])) continue;
        const p = [...f.path, 'unknownExtraField'];
        add({
          cls: 'body-unknown-field',
          name: `unknown field ${fieldName(p)}`,
          body: json(setAt(base, p, 1)),
          expect: '4xx',
          statuses: [400],
          field: p,
          names: true,
        });
      }
    }

    // Values at the edges of what the document allows, each of which it refuses: numbers past a bound, too big for a
    // double or a safe integer, fractions where it says integer; text one character past maxLength, holding a lone
    // surrogate, or characters its pattern leaves out; dates of the right shape that no calendar has.
    for (const f of reachable) {
      for (const [label, raw] of edgeValues(reader, f.schema, reader.sample(f.schema))) {
        add({
          cls: 'body-edge-values',
          name: `${fieldName(f.path)}: ${label}`,
          body: json(setAt(base, f.path, EDGE_MARK)).replace(JSON.stringify(EDGE_MARK), raw),
          expect: '4xx',
          statuses: [400],
          field: f.path,
          names: true,
        });
      }
    }

    // Not JSON, or not said to be JSON.
    const ok = json(base);
    add({ cls: 'body-syntax-and-content-type', name: 'truncated JSON', body: ok.slice(0, Math.max(1, ok.length - 1)), expect: '4xx' });
    add({ cls: 'body-syntax-and-content-type', name: 'JSON with a trailing comma', body: ok.replace(/}$/, ',}'), expect: '4xx' });
    add({ cls: 'body-syntax-and-content-type', name: 'single-quoted pseudo-JSON', body: "{'a': 1}", expect: '4xx' });
    add({ cls: 'body-syntax-and-content-type', name: 'text/plain', body: ok, contentType: 'text/plain', expect: '4xx' });
    add({
      cls: 'body-syntax-and-content-type',
      name: 'application/x-www-form-urlencoded',
      body: formEncode(base),
      contentType: 'application/x-www-form-urlencoded',
      expect: '4xx',
    });
    const boundary = 'malformedInputBoundary';
    const multipart = `--${boundary}\r\nContent-Disposition: form-data; name="body"\r\nContent-Type: application/json\r\n\r\n${ok}\r\n--${boundary}--\r\n`;
    add({
      cls: 'body-syntax-and-content-type',
      name: 'multipart/form-data',
      body: multipart,
      contentType: `multipart/form-data; boundary=${boundary}`,
      expect: '4xx',
    });
    add({ cls: 'body-syntax-and-content-type', name: 'no content type', body: ok, contentType: null, expect: '4xx' });
  } else if (op.method !== 'GET' && op.method !== 'HEAD') {
    // Takes no body, but a body declared as JSON is still parsed: broken JSON must be a 4xx, not reach the handler.
    add({ cls: 'body-syntax-and-content-type', name: 'truncated JSON on an operation without a body', body: '{"a":', expect: '4xx' });
  }

  // Path parameters: one bad value at a time, the others valid.
  const base = bodySchema !== undefined ? JSON.stringify(reader.sample(bodySchema)) : undefined;
  const pathParams = (op.op.parameters ?? []).filter((p) => p.in === 'path');
  const badPathValues: Array<[string, string]> = [
    ['lone %', '%'],
    ['%ff (not UTF-8)', '%ff'],
    ['a%zz (bad escape)', 'a%zz'],
    ['600 characters', 'p'.repeat(600)],
    ['10,000 characters', 'q'.repeat(10_000)],
    ['unicode (encoded)', encodeURIComponent('café-☃-💳')],
    ['..', '..'],
  ];
  for (const p of pathParams) {
    for (const [label, raw] of badPathValues) {
      add({
        cls: 'path-params',
        name: `${p.name}: ${label}`,
        url: buildUrl(reader, op, { [p.name]: raw }),
        body: base,
        expect: '4xx',
        statuses: [400, 404, 414],
        bigInputs: raw.length >= 1000 ? [raw] : [],
      });
    }
  }

  // Query parameters (GET): wrong types, huge values, repeats. A 2xx is allowed; a 5xx is not.
  const queryParams = (op.op.parameters ?? []).filter((p) => p.in === 'query');
  if (op.method === 'GET') {
    for (const p of queryParams) {
      const n = encodeURIComponent(p.name);
      const bigDigits = '9'.repeat(10_000);
      const bigText = 'y'.repeat(10_000);
      const values: Array<[string, string, string[]]> = [
        ['text', `${n}=abc`, []],
        ['fraction', `${n}=1.5`, []],
        ['negative', `${n}=-1`, []],
        ['exponent', `${n}=1e3`, []],
        ['empty', `${n}=`, []],
        ['no value', n, []],
        ['boolean', `${n}=true`, []],
        ['beyond 2^53', `${n}=99999999999999999999`, []],
        ['10,000 digits', `${n}=${bigDigits}`, [bigDigits]],
        ['10,000 characters', `${n}=${bigText}`, [bigText]],
        ['unicode', `${n}=${encodeURIComponent('☃💳')}`, []],
        ['bad escape', `${n}=a%zz`, []],
        ['repeated', `${n}=1&${n}=2`, []],
        ['bracket array', `${n}[]=1`, []],
        ['bracket object', `${n}[a]=1`, []],
      ];
      for (const [label, q, big] of values) {
        add({ cls: 'query-params', name: `${p.name}: ${label}`, url: buildUrl(reader, op, {}, { name: p.name, text: q }), expect: 'not-5xx', bigInputs: big });
      }
    }
  }
  return cases;
}

// --- Credentials ------------------------------------------------------------------------

/** The security requirement an operation needs (its own, else the document's); undefined when anonymous. */
export function securityOf(doc: OpenApiDocument, op: Operation): Record<string, string[]> | undefined {
  const reqs = op.op.security ?? doc.security ?? [];
  return reqs.length ? reqs[0] : undefined;
}

/**
 * Headers carrying valid credentials for the operation's first security
 * requirement (the scheme names of src/platform/http/security-schemes.ts). A merchant
 * request is signed over exactly `url` and `body`. Throws for a scheme this
 * test does not know, so a new kind of caller is noticed rather than sent
 * unauthenticated.
 */
export function credentialHeaders(doc: OpenApiDocument, op: Operation, url: string, body: string | undefined): Record<string, string> {
  const req = securityOf(doc, op);
  if (!req) return {};
  const out: Record<string, string> = {};
  for (const scheme of Object.keys(req)) {
    switch (scheme) {
      case SECURITY.user:
        out[HEADERS.authorization] = `Bearer ${userToken('acct-x')}`;
        break;
      case SECURITY.merchant:
      case SECURITY.merchantSecret: {
        const h = merchantHeaders(op.method, url, body ?? '');
        delete h['content-type'];
        Object.assign(out, h);
        break;
      }
      case SECURITY.service:
        out[HEADERS.service] = CREDS.serviceToken;
        break;
      case SECURITY.admin:
        out[HEADERS.admin] = CREDS.adminKey;
        break;
      default:
        throw new Error(`${op.id}: security scheme ${scheme} is not known to the malformed-input test; teach credentialHeaders() about it`);
    }
  }
  return out;
}

// --- Echo check ------------------------------------------------------------------------

/**
 * Whether `text` contains a 1,000-character run of `input`. Checks the runs
 * starting at the first 64 offsets, which is every distinct run for the
 * periodic inputs the cases send (period at most 64).
 */
export function echoes(text: string, input: string, run = 1000): boolean {
  if (input.length < run) return false;
  for (let i = 0; i <= Math.min(64, input.length - run); i++) if (text.includes(input.slice(i, i + run))) return true;
  return false;
}

/**
 * Runs `read` (requests for the OpenAPI document) again, up to 5 times, until it starts and ends in the same
 * wall-clock second: the document's "from now" date examples are set to the whole second it is served in, so two
 * copies read across a second boundary differ there and nowhere else.
 */
export async function inOneSecond<T>(read: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const second = Math.floor(Date.now() / 1000);
    const result = await read();
    if (Math.floor(Date.now() / 1000) === second || attempt === 5) return result;
  }
}
