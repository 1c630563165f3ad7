import { isUtf8 } from 'node:buffer';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError, boundedName, fieldError } from './api.error';

/** Deepest nesting of arrays and objects a request body may have. The deepest documented body nests 4 levels. */
export const MAX_JSON_DEPTH = 32;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/**
 * Whether JSON text nests arrays/objects deeper than `max`, found by one pass
 * over the bytes (brackets inside strings do not count), before anything parses
 * or walks it. Malformed text is left to the parser. A body shorter than
 * 2 × `max` bytes cannot be too deep and is not scanned.
 */
export function jsonNestsDeeperThan(body: Buffer, max: number): boolean {
  if (body.length <= 2 * max || opensAtMost(body, max)) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > max) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
  }
  return false;
}

const ESCAPE_U = Buffer.from('\\u');

/**
 * Whether the text opens at most `max` arrays and objects in all (brackets inside strings counted too): then it
 * cannot nest deeper. A few byte searches tell it for most bodies, without the walk of every byte.
 */
function opensAtMost(body: Buffer, max: number): boolean {
  let opened = 0;
  for (const bracket of [OPEN_ARRAY, OPEN_OBJECT])
    for (let i = body.indexOf(bracket); i !== -1; i = body.indexOf(bracket, i + 1)) if (++opened > max) return false;
  return true;
}

/**
 * Whether the bytes may hold a surrogate: one reaches parsed JSON only as a `\uD800`-`\uDFFF` escape (UTF-8
 * bytes cannot encode one). Most bodies hold no backslash at all, which one byte search tells; a false alarm
 * (`\ud0..`) only costs the walk. (A string needle made Node encode it on every call: two of those cost more
 * than the parse of a small body.)
 */
export function maySurrogate(body: Buffer): boolean {
  if (body.indexOf(BACKSLASH) === -1) return false;
  for (let i = body.indexOf(ESCAPE_U); i !== -1; i = body.indexOf(ESCAPE_U, i + 2)) {
    const c = body[i + 2];
    if (c === 0x64 || c === 0x44) return true; // d, D
  }
  return false;
}

/**
 * The path (`a.b[0].c`, as validation names fields) of the first string in `value`, key or value,
 * that holds a lone surrogate; undefined when there is none.
 */
export function loneSurrogateField(value: unknown, path = ''): string | undefined {
  // Not well-formed: a UTF-16 surrogate without its other half, text that is not Unicode (no UTF-8 for it; Redis's Lua JSON refuses its escape).
  if (typeof value === 'string') return value.isWellFormed() ? undefined : path || 'body';
  if (value === null || typeof value !== 'object') return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = loneSurrogateField(value[i], `${path}[${i}]`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const [key, v] of Object.entries(value)) {
    // A key is input too: named cut short, never echoed at length.
    const name = boundedName(key);
    const field = path ? `${path}.${name}` : name;
    if (!key.isWellFormed()) return path || 'body';
    const found = loneSurrogateField(v, field);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * Array fields whose items a route checks one by one (one bad item fails only itself): a lone surrogate
 * inside an item is left to the route, which refuses that item alone (see `loneSurrogateField`).
 */
const PER_ITEM_ARRAYS: ReadonlyMap<string, string> = new Map([['POST /messages/batch', 'messages']]);

export const notUnicodeMessage = (field: string) => `${field} must be valid Unicode text (it holds a lone surrogate)`;

/** On an item of a per-item array that holds a lone surrogate: the field's name (not enumerable, so no validation sees it). */
export const NOT_UNICODE = Symbol('notUnicode');

/** Marks each object item of `body[array]` that holds a lone surrogate with NOT_UNICODE. */
function markPerItem(body: unknown, array: string): void {
  const items = (body as Record<string, unknown>)[array];
  if (!Array.isArray(items)) return;
  items.forEach((item) => {
    if (item === null || typeof item !== 'object') return;
    const field = loneSurrogateField(item);
    if (field !== undefined) Object.defineProperty(item, NOT_UNICODE, { value: field, enumerable: false });
  });
}

const notUnicode = (field: string) => fieldError(field, notUnicodeMessage(field));

const unsupportedEncoding = () => new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', 'The request body must not be encoded (no Content-Encoding)');

export const unsupportedMediaType = () => new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', 'The request body must be application/json');

const notUtf8 = () => new ApiError(400, 'BAD_REQUEST', 'Request body is not valid UTF-8 (JSON must be UTF-8)');

/** JSON the parser refused although it is valid: a `__proto__` key, or a `constructor` key holding `prototype` (prototype poisoning). */
export const forbiddenKey = () => new ApiError(400, 'BAD_REQUEST', 'Request body must not have a "__proto__" key, or a "constructor" key holding "prototype"');

export const bodyTooDeep = () => new ApiError(400, 'BODY_TOO_DEEP', `Request body nests arrays or objects deeper than ${MAX_JSON_DEPTH} levels`);

/** Thrown by `jsonBreaksAt`'s walk: the index where the text stops being JSON. */
class BreaksAt {
  constructor(readonly at: number) {}
}

const JSON_ESCAPES = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't']);
const isDigit = (c: string | undefined) => c !== undefined && c >= '0' && c <= '9';
const isHex = (c: string | undefined) => c !== undefined && /^[0-9a-fA-F]$/.test(c);

/**
 * Where JSON text (RFC 8259) first breaks: the index of the first character that cannot continue it, the length when
 * it ends too soon, or -1 when it is valid. Runs only on text the parser refused, whose nesting was bounded before
 * (MAX_JSON_DEPTH), so the walk's recursion is too.
 */
export function jsonBreaksAt(text: string): number {
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0; // a byte order mark, which the parser skips too
  const fail = (): never => {
    throw new BreaksAt(i);
  };
  const space = () => {
    while (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r') i++;
  };
  const expect = (c: string) => (text[i] === c ? i++ : fail());
  const digits = () => {
    if (!isDigit(text[i])) fail();
    while (isDigit(text[i])) i++;
  };
  const string = () => {
    expect('"');
    for (;;) {
      if (i >= text.length || text.charCodeAt(i) < 0x20) fail();
      const c = text[i++];
      if (c === '"') return;
      if (c !== '\\') continue;
      if (text[i] === 'u') {
        i++;
        for (let k = 0; k < 4; k++)
          if (isHex(text[i])) i++;
          else fail();
      } else if (JSON_ESCAPES.has(text[i])) i++;
      else fail();
    }
  };
  const value = (): void => {
    space();
    const c = text[i];
    if (c === '{' || c === '[') {
      const close = c === '{' ? '}' : ']';
      i++;
      space();
      if (text[i] === close) return void i++;
      for (;;) {
        if (c === '{') {
          space();
          string();
          space();
          expect(':');
        }
        value();
        space();
        if (text[i] === ',') i++;
        else return void expect(close);
      }
    }
    if (c === '"') return string();
    for (const literal of ['true', 'false', 'null']) if (c === literal[0]) return void [...literal].forEach(expect);
    if (c !== '-' && !isDigit(c)) fail();
    if (c === '-') i++;
    if (text[i] === '0') i++;
    else digits();
    if (text[i] === '.') {
      i++;
      digits();
    }
    if (text[i] === 'e' || text[i] === 'E') {
      i++;
      if (text[i] === '+' || text[i] === '-') i++;
      digits();
    }
  };
  try {
    value();
    space();
    if (i < text.length) fail();
    return -1;
  } catch (err) {
    if (err instanceof BreaksAt) return err.at;
    throw err;
  }
}

/** A body that is not JSON, told where it breaks: the line and column (from 1), and the character found there. */
export function invalidJson(text: string): ApiError {
  const at = jsonBreaksAt(text);
  if (at === -1) return new ApiError(400, 'BAD_REQUEST', 'Request body is not valid JSON');
  const before = text.slice(0, at);
  const line = before.split('\n').length;
  const column = at - before.lastIndexOf('\n');
  const where = `line ${line}, column ${column} (character ${at + 1})`;
  if (at >= text.length) return new ApiError(400, 'BAD_REQUEST', `Request body is not valid JSON: it ends too soon, at ${where}`);
  const found = String.fromCodePoint(text.codePointAt(at)!);
  return new ApiError(400, 'BAD_REQUEST', `Request body is not valid JSON: unexpected ${JSON.stringify(found)} at ${where}`);
}

function isValidJson(body: string | Buffer): boolean {
  try {
    JSON.parse(String(body));
    return true;
  } catch {
    return false;
  }
}

/** A request that says it carries no bytes: `Content-Length: 0`, or neither a length nor a chunked body. */
const hasNoBody = (req: FastifyRequest): boolean =>
  req.headers['content-length'] === '0' || (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined);

/**
 * The service's only body parser: `application/json`, kept as raw bytes too
 * (merchant signatures cover them), refused before parsing when it nests too
 * deep. A string (or key) holding a lone UTF-16 surrogate, which no UTF-8 text
 * can carry, is a 400 naming the field: looked for only when the bytes hold such
 * an escape. Bytes that are not UTF-8 are a 400 before parsing. A body with a Content-Encoding (gzip…) gets a 415: bodies are not
 * decompressed. Any other media type gets a 415 (Fastify's own would quote the
 * Content-Type header back, and its `text/plain` parser would hand a string to
 * validation).
 */
export function registerJsonBodyParser(fastify: FastifyInstance): void {
  const parseSecure = fastify.getDefaultJsonParser('error', 'error');
  // Fastify answers a prototype-poisoning key as "not valid JSON"; valid JSON refused is told why (the error path only).
  const parseJson = (req: FastifyRequest, body: string, done: (err: Error | null, value?: unknown) => void) =>
    parseSecure(req, body, (err: Error | null, value?: unknown) => done(err && (isValidJson(body) ? forbiddenKey() : invalidJson(String(body))), value));
  fastify.removeContentTypeParser('text/plain');
  // An empty body of any type is no body (clients send `curl -d ''` as a form, and many send a Content-Type with every
  // POST, body or not); a route that needs one says so.
  fastify.addContentTypeParser('*', (req, _payload, done) => done(hasNoBody(req) ? null : unsupportedMediaType(), undefined));
  fastify.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req: FastifyRequest & { rawBody?: Buffer }, body: Buffer, done) => {
    req.rawBody = body;
    const encoding = req.headers['content-encoding'];
    // Fastify's JSON parser would answer an empty body with its own 400 ("Body cannot be empty…").
    if (body.length === 0) done(null, undefined);
    // Bodies are never decompressed: a compressed one would be read as if it were not.
    else if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') done(unsupportedEncoding(), undefined);
    else if (jsonNestsDeeperThan(body, MAX_JSON_DEPTH)) done(bodyTooDeep(), undefined);
    // JSON is UTF-8 (RFC 8259): other bytes (Latin-1 "Café") were read as U+FFFD and stored that way.
    else if (!isUtf8(body)) done(notUtf8(), undefined);
    else if (!maySurrogate(body)) parseJson(req, body as unknown as string, done);
    else
      parseJson(req, body as unknown as string, (err: Error | null, value?: unknown) => {
        const field = err ? undefined : loneSurrogateField(value);
        const perItem = PER_ITEM_ARRAYS.get(`${req.method} ${req.routeOptions.url}`);
        if (field === undefined) done(err, value);
        else if (perItem !== undefined && field.startsWith(`${perItem}[`)) {
          markPerItem(value, perItem);
          done(null, value);
        } else done(notUnicode(field), undefined);
      });
  });
}
