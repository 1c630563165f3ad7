import { ValidationPipe } from '@nestjs/common';
import fc from 'fast-check';
import { matching } from '../../../../test/support/arbitraries';
import { ApiError } from '../../../platform/http/api.error';
import { fastPathFor } from '../../../platform/http/fast-path';
import { createValidationPipe, validationPipeOptions } from '../../../platform/http/validation';
import { ACCOUNT_ID_RE } from '../../../platform/core/ids';
import { OUTER_BIZ_ID_RE, WRITABLE_BIZ_TYPE_RE, WriteMessageDto } from './write-message.dto';

/**
 * POST /messages skips class-transformer and class-validator's error building when the fast path accepts the
 * body. That is only sound if the fast path is never looser than the decorators:
 * every body it accepts, class-validator must accept too. Checked on bodies
 * built from values near every rule's edges.
 */
const meta = { type: 'body' as const, metatype: WriteMessageDto, data: undefined };
const classValidator = new ValidationPipe(validationPipeOptions());
const slowAccepts = (body: unknown) =>
  classValidator.transform(body, meta).then(
    () => true,
    () => false,
  );
const fast = fastPathFor(WriteMessageDto)!;

// Characters that sit on the rules' edges: surrogate pairs and variation selectors (class-validator
// counts lengths its own way), whitespace, the deep-link and URL punctuation, non-ASCII.
const edgeChar = fc.constantFrom('a', 'Z', '0', '_', '.', ':', '-', '/', ' ', '\n', '\t', 'é', '😀', '\uD83D', '\uFE0F', '\u200B', '%', '"', '\\', '<', 'T');
const edgeString = (maxLen: number) =>
  fc.oneof(
    fc.string({ unit: edgeChar, maxLength: maxLen + 3 }),
    fc.string({ unit: edgeChar, minLength: Math.max(0, maxLen - 2), maxLength: maxLen + 2 }),
    fc.constantFrom('', 'x'.repeat(maxLen), 'x'.repeat(maxLen + 1), '😀'.repeat(maxLen), '😀'.repeat(Math.ceil(maxLen / 2)), 'a\uFE0F'.repeat(maxLen)),
  );
const wrongType = fc.constantFrom<unknown>(null, 0, 1, true, false, [], {}, ['x'], { a: 1 });
const ABSENT = Symbol('absent');
/** Mostly a valid value, often one near an edge, sometimes the wrong type or no value at all. */
const field = (valid: fc.Arbitrary<unknown>, edge: fc.Arbitrary<unknown>) =>
  fc.oneof(
    { weight: 12, arbitrary: valid },
    { weight: 4, arbitrary: edge },
    { weight: 1, arbitrary: wrongType },
    { weight: 1, arbitrary: fc.constant(ABSENT) },
  );
const link = (schemes: string[]) =>
  fc.oneof(
    fc.tuple(fc.constantFrom(...schemes, 'http://', 'javascript:', 'HTTPS://', 'https:/', ''), edgeString(30)).map(([a, b]) => a + b),
    fc.constantFrom('https://' + 'x'.repeat(2040), 'https://' + 'x'.repeat(2041), 'redispay://orders/1', 'https://a b'),
  );
const dateTime = fc.oneof(
  fc.date({ min: new Date(-1e14), max: new Date(1e14), noInvalidDate: true }).map((d) => d.toISOString()),
  fc.constantFrom(
    '2026-11-22T08:30:00Z',
    '2026-11-22T08:30Z',
    '2026-11-22T08:30:00.123456789+08:00',
    '2026-11-22T08:30:00.1234567890Z',
    '2026-02-30T08:30:00Z',
    '2026-11-22T25:30:00Z',
    '2026-11-22',
    '2026-11-22T08:30:00',
    '20261122T083000Z',
    '2026-W47-7T08:30:00Z',
    '2026-326T08:30:00Z',
    '2026-11-22 08:30:00Z',
    '+002026-11-22T08:30:00Z',
    ' 2026-11-22T08:30:00Z',
  ),
  edgeString(40),
);

const body = fc
  .record({
    accountId: field(fc.constantFrom('acc_1001', 'a:b.c-d_e', 'x'.repeat(64)), edgeString(64)),
    bizType: field(fc.constantFrom('PAYMENT_SUCCESS', 'a.b-c', 'B'.repeat(32)), edgeString(32)),
    outerBizId: field(fc.constantFrom('order-1', '!~"#', '~'.repeat(64)), edgeString(64)),
    title: field(fc.string({ minLength: 1, maxLength: 100 }), edgeString(100)),
    content: field(fc.string({ minLength: 1, maxLength: 2000 }), edgeString(2000)),
    url: field(fc.constant(ABSENT), link(['https://', 'redispay://'])),
    logoUrl: field(fc.constant(ABSENT), link(['https://'])),
    needPush: field(fc.boolean(), fc.constantFrom<unknown>('true', 1, 0)),
    createdAt: field(fc.constant(ABSENT), dateTime),
    extra: fc.oneof({ weight: 12, arbitrary: fc.constant(ABSENT) }, { weight: 1, arbitrary: fc.anything() }),
  })
  .map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== ABSENT)));

const validBody = fc.record(
  {
    accountId: matching(ACCOUNT_ID_RE),
    bizType: matching(WRITABLE_BIZ_TYPE_RE),
    outerBizId: matching(OUTER_BIZ_ID_RE),
    // Shown text is never blank (white space only).
    title: fc.string({ minLength: 1, maxLength: 100 }).filter((t) => /\S/.test(t)),
    content: fc.string({ minLength: 1, maxLength: 2000 }).filter((t) => /\S/.test(t)),
    url: fc.webUrl({ validSchemes: ['https'] }),
    needPush: fc.boolean(),
    createdAt: fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }).map((d) => d.toISOString()),
  },
  { requiredKeys: ['accountId', 'bizType', 'outerBizId', 'title', 'content'] },
);

describe('WriteMessageDto fast path', () => {
  it('never accepts a body class-validator refuses', async () => {
    let fastAccepted = 0;
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        if (!fast(b)) return;
        fastAccepted++;
        expect(await slowAccepts(b)).toBe(true);
      }),
      { numRuns: 20_000, seed: 20261122 },
    );
    // The generator reaches the accepting side often enough for the check to mean something.
    expect(fastAccepted).toBeGreaterThan(1_000);
  });

  it('is never looser on fields that are each valid or each broken on their own', async () => {
    const keys = ['accountId', 'bizType', 'outerBizId', 'title', 'content', 'url', 'logoUrl', 'needPush', 'createdAt'] as const;
    const base = { accountId: 'acc_1', bizType: 'T', outerBizId: 'o-1', title: 't', content: 'c' };
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...keys), body, async (key, b) => {
        if (!(key in b)) return;
        const one = { ...base, [key]: b[key] };
        if (fast(one)) expect(await slowAccepts(one)).toBe(true);
      }),
      { numRuns: 20_000, seed: 7 },
    );
  });

  it('takes ordinary valid bodies, and the pipe hands them on unchanged', async () => {
    const pipe = createValidationPipe();
    await fc.assert(
      fc.asyncProperty(validBody, async (b) => {
        expect(fast(b)).toBe(true);
        expect(await slowAccepts(b)).toBe(true);
        expect(await pipe.transform(b, meta)).toEqual(b);
      }),
      { numRuns: 2_000, seed: 1 },
    );
  });

  it('leaves every refusal to class-validator, so a 400 names the field as before', async () => {
    const pipe = createValidationPipe();
    const bad = { accountId: 'acc_1', bizType: 'T', outerBizId: 'o-1', title: 'x'.repeat(101), content: 'c', extra: 1 };
    expect(fast(bad)).toBe(false);
    const err: unknown = await Promise.resolve(pipe.transform(bad, meta)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({
      code: 'VALIDATION_FAILED',
      details: expect.arrayContaining([
        { field: 'extra', errors: ['property extra should not exist'] },
        { field: 'title', errors: ['title must be shorter than or equal to 100 characters'] },
      ]),
    });
  });
});
