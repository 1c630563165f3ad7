import fc from 'fast-check';
import { invalidJson, jsonBreaksAt, jsonNestsDeeperThan, loneSurrogateField, MAX_JSON_DEPTH, maySurrogate } from './json-body';

const deeper = (text: string, max = 3) => jsonNestsDeeperThan(Buffer.from(text), max);
const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

describe(jsonNestsDeeperThan.name, () => {
  it('finds nesting deeper than the limit, in arrays, objects and mixed', () => {
    expect(deeper('[[[[1]]]]')).toBe(true);
    expect(deeper('{"a":{"b":{"c":{"d":1}}}}')).toBe(true);
    expect(deeper('{"a":[{"b":[1]}]}')).toBe(true);
  });

  it('accepts nesting up to the limit, however long the body', () => {
    expect(deeper('[[[1]]]')).toBe(false);
    expect(deeper(`{"a":[${'{"b":[1,2,3]},'.repeat(1000)}{}]}`, 4)).toBe(false);
  });

  it('does not count brackets inside strings, escaped quotes included', () => {
    expect(deeper(`{"a":"${'['.repeat(100)}"}`)).toBe(false);
    expect(deeper(`{"a":"\\"${'{'.repeat(100)}\\\\"}`)).toBe(false);
    expect(deeper(`{"a":"\\\\","b":[[[[1]]]]}`)).toBe(true);
  });

  it('counts depth, not the number of brackets', () => {
    expect(deeper('[[1],[2],[3],[4],[5],[6],[7],[8],[9],[10]]')).toBe(false);
  });

  it('finds the 30,000-level body of the acceptance test under the real limit', () => {
    expect(jsonNestsDeeperThan(Buffer.from(`{"amount":1,"x":${nested(30_000)}}`), MAX_JSON_DEPTH)).toBe(true);
    expect(jsonNestsDeeperThan(Buffer.from(`{"x":${nested(MAX_JSON_DEPTH - 1)}}`), MAX_JSON_DEPTH)).toBe(false);
    expect(jsonNestsDeeperThan(Buffer.from(`{"x":${nested(MAX_JSON_DEPTH)}}`), MAX_JSON_DEPTH)).toBe(true);
  });

  it('leaves non-ASCII text alone (UTF-8 continuation bytes are never brackets or quotes)', () => {
    expect(deeper(`{"a":"${'😀é中'.repeat(50)}","b":[[1]]}`)).toBe(false);
  });
});

describe(loneSurrogateField.name, () => {
  it('names the first string or key holding a lone surrogate, as validation names fields', () => {
    expect(loneSurrogateField({ a: 'ok', b: 'x\ud800' })).toBe('b');
    expect(loneSurrogateField({ instructions: [{ method: 'q' }, { method: '\udc00y' }] })).toBe('instructions[1].method');
    expect(loneSurrogateField({ ctx: { ['k\ud800']: 1 } })).toBe('ctx');
    expect(loneSurrogateField('\ud800')).toBe('body');
  });

  it('accepts surrogate pairs and every other value', () => {
    expect(loneSurrogateField({ a: '😀 \ud83d\ude00', b: [1, null, true, { c: 'é' }] })).toBeUndefined();
  });
});

describe(maySurrogate.name, () => {
  const may = (text: string) => maySurrogate(Buffer.from(text));

  it('finds a \\uD800-\\uDFFF escape, in either case, wherever it is', () => {
    expect(may('{"a":"\\ud800"}')).toBe(true);
    expect(may('{"a":"x\\n\\u0041\\uDC00"}')).toBe(true);
    expect(may('"\\uDfff')).toBe(true);
  });

  it('says no for bodies with no backslash, or only other escapes', () => {
    expect(may('{"label":"home"}')).toBe(false);
    expect(may('{"a":"\\n\\t\\u0041\\u00e9\\\\"}')).toBe(false);
    expect(may('{"a":"ud800 \\\\"}')).toBe(false);
  });
});

describe(jsonBreaksAt.name, () => {
  const parses = (text: string) => {
    try {
      JSON.parse(text);
      return true;
    } catch {
      return false;
    }
  };

  it('agrees with JSON.parse on every JSON text, and on that text cut short, with a character more, or one changed', () => {
    fc.assert(
      fc.property(fc.json(), fc.nat(), fc.constantFrom(...' ,:{}[]"\\0-.eE+tfnux\'\n\u0001'), (json, n, c) => {
        expect(jsonBreaksAt(json)).toBe(-1);
        const at = n % (json.length + 1);
        for (const text of [json.slice(0, at), json.slice(0, at) + c + json.slice(at), json.slice(0, at) + c + json.slice(at + 1)]) {
          expect(jsonBreaksAt(text) === -1).toBe(parses(text));
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('points at the first character that cannot continue the text, or at its end', () => {
    expect(jsonBreaksAt('{"a":1,}')).toBe(7);
    expect(jsonBreaksAt('{"a": tru}')).toBe(9);
    expect(jsonBreaksAt('{"a":1')).toBe(6);
    expect(invalidJson('{\n  "a": 1\n  "b": 2\n}').message).toBe('Request body is not valid JSON: unexpected "\\"" at line 3, column 3 (character 14)');
  });
});
