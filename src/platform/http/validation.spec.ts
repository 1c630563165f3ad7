import { Type } from 'class-transformer';
import { IsInt, IsOptional, IsString, Max, Min, MinLength, ValidateNested, ValidationError } from 'class-validator';
import { ApiError, listedMessage, MAX_ERROR_DETAILS, MAX_LISTED_MESSAGE } from './api.error';
import { IsOptionalField } from './optional-field';
import { createValidationPipe, type FieldError, flattenValidationErrors } from './validation';

class LineDto {
  @IsString()
  @MinLength(1)
  sku!: string;

  @IsInt()
  @Min(1)
  @Max(100)
  qty!: number;
}

class AddressDto {
  @IsString()
  city!: string;
}

class OrderDto {
  @IsInt()
  @Min(1)
  amount!: number;

  @IsOptional()
  @IsString()
  note?: string;

  @IsOptionalField()
  @IsInt()
  tip?: number;

  @ValidateNested()
  @Type(() => AddressDto)
  address!: AddressDto;

  @ValidateNested({ each: true })
  @Type(() => LineDto)
  lines!: LineDto[];
}

class ParamDto {
  @IsString()
  name!: string;
}

const valid = () => ({ amount: 500, address: { city: 'Oslo' }, lines: [{ sku: 'a', qty: 1 }] });

const ve = (property: string, constraints?: Record<string, string>, children: ValidationError[] = []): ValidationError =>
  Object.assign(new ValidationError(), { property, constraints, children });

describe('Validation', () => {
  describe(flattenValidationErrors.name, () => {
    it('gives dotted paths with [i] for array indexes', () => {
      const errors = [ve('a', undefined, [ve('b', undefined, [ve('0', undefined, [ve('c', { isInt: 'c must be an integer number' })])])])];
      expect(flattenValidationErrors(errors)).toEqual([{ field: 'a.b[0].c', errors: ['c must be an integer number'] }]);
    });

    it('handles nested arrays, top-level fields and errors on both a parent and its children', () => {
      const errors = [
        ve('amount', { min: 'amount must not be less than 1', isInt: 'amount must be an integer number' }),
        ve('grid', { arrayMinSize: 'grid too small' }, [ve('2', undefined, [ve('10', { isInt: 'bad cell' })])]),
        ve('x', undefined, [ve('y', undefined, [ve('z', { isString: 'z must be a string' })])]),
      ];
      expect(flattenValidationErrors(errors)).toEqual<FieldError[]>([
        { field: 'amount', errors: ['amount must not be less than 1', 'amount must be an integer number'] },
        { field: 'grid', errors: ['grid too small'] },
        { field: 'grid[2][10]', errors: ['bad cell'] },
        { field: 'x.y.z', errors: ['z must be a string'] },
      ]);
    });

    it('only treats all-digit properties as indexes', () => {
      expect(flattenValidationErrors([ve('a', undefined, [ve('1b', { c: 'm' })])])).toEqual([{ field: 'a.1b', errors: ['m'] }]);
    });

    it('returns nothing for no errors and for errors without constraints anywhere', () => {
      expect(flattenValidationErrors([])).toEqual([]);
      expect(flattenValidationErrors([ve('a', undefined, [ve('b')])])).toEqual([]);
    });
  });

  describe(createValidationPipe.name, () => {
    const pipe = createValidationPipe();
    // The pipe answers synchronously on its fast path and with a promise otherwise, as Nest allows.
    const run = async (value: unknown) => pipe.transform(value, { type: 'body', metatype: OrderDto });
    const runParam = async (value: unknown) => pipe.transform(value, { type: 'param', metatype: ParamDto });

    async function failure(value: unknown): Promise<ApiError> {
      let caught: unknown;
      try {
        await run(value);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ApiError);
      const err = caught as ApiError;
      expect(err.getStatus()).toBe(400);
      expect(err.code).toBe('VALIDATION_FAILED');
      return err;
    }
    const fields = (err: ApiError) => (err.details as FieldError[]).map((d) => d.field);

    it('hands a valid body on as it was parsed (the fast path: no copy, no class instances)', async () => {
      const body = valid();
      await expect(run(body)).resolves.toBe(body);
    });

    it('rejects an unknown top-level field and names it', async () => {
      const err = await failure({ ...valid(), admin: true });
      expect(err.details).toEqual([{ field: 'admin', errors: ['property admin should not exist'] }]);
      expect(err.message).toContain('admin');
    });

    it('rejects an unknown nested field with its path', async () => {
      const body = valid();
      const err = await failure({
        ...body,
        lines: [
          { sku: 'a', qty: 1 },
          { sku: 'b', qty: 2, price: 1 },
        ],
      });
      expect(fields(err)).toEqual(['lines[1].price']);
    });

    it('names the failing field inside an array element', async () => {
      const err = await failure({
        ...valid(),
        lines: [
          { sku: 'a', qty: 1 },
          { sku: 'b', qty: 1000 },
        ],
      });
      expect(fields(err)).toEqual(['lines[1].qty']);
      expect(err.message).toBe('qty must not be greater than 100');
    });

    it('names nested object fields', async () => {
      expect(fields(await failure({ ...valid(), address: { city: 7 } }))).toEqual(['address.city']);
    });

    it('does not convert types implicitly', async () => {
      const err = await failure({ ...valid(), amount: '500' });
      expect(fields(err)).toEqual(['amount']);
    });

    it('a value of the wrong type is told the type it must have, not the ranges it was never measured against', async () => {
      // A string amount broke @Min and @Max too, and was told "must not be greater than 100, must not be less than 1, ...".
      expect((await failure({ ...valid(), lines: [{ sku: 'a', qty: '5' }] })).details).toEqual([
        { field: 'lines[0].qty', errors: ['qty must be an integer number'] },
      ]);
      expect((await failure({ ...valid(), lines: [{ sku: 5, qty: 1 }] })).details).toEqual([{ field: 'lines[0].sku', errors: ['sku must be a string'] }]);
      // The right type: every rule it breaks.
      expect((await failure({ ...valid(), lines: [{ sku: 'a', qty: 0.5 }] })).details).toEqual([
        { field: 'lines[0].qty', errors: ['qty must not be less than 1', 'qty must be an integer number'] },
      ]);
    });

    it('stays small however many fields fail: 5,000 unknown fields give a message of at most 500 characters that counts the rest, and 50 details', async () => {
      const body: Record<string, unknown> = { ...valid() };
      for (let i = 0; i < 5000; i++) body[`k${i}`] = 1;
      const err = await failure(body);
      expect(err.message.length).toBeLessThanOrEqual(MAX_LISTED_MESSAGE);
      expect(err.message).toMatch(/^property k0 should not exist; property k1 should not exist; .*; … and \d+ more$/);
      const listed = err.message.split('; ').length - 1;
      expect(Number(/and (\d+) more$/.exec(err.message)![1])).toBe(5000 - listed);
      expect(err.details).toHaveLength(MAX_ERROR_DETAILS);
      expect((err.details as FieldError[])[0]).toEqual({ field: 'k0', errors: ['property k0 should not exist'] });
    });

    it('lists failures while they fit (listedMessage)', () => {
      expect(listedMessage(['a', 'b', 'c'])).toBe('a; b; c');
      const ten = 'x'.repeat(10);
      expect(listedMessage(Array(10).fill(ten), 40)).toBe(`${ten}; ${ten}; … and 8 more`);
      expect(listedMessage([ten, ten, ten], 34)).toBe(`${ten}; ${ten}; ${ten}`);
      expect(listedMessage(['x'.repeat(40)], 20)).toBe(`${'x'.repeat(19)}…`);
      expect(listedMessage([])).toBe('');
    });

    it('reports every failing field, joined in the message', async () => {
      const err = await failure({ amount: 0, address: {}, lines: [{ sku: '', qty: 1 }], extra: 1 });
      expect(fields(err).sort()).toEqual(['address.city', 'amount', 'extra', 'lines[0].sku'].sort());
      expect(err.message.split('; ')).toHaveLength(4);
    });

    it('does not echo the rejected values', async () => {
      const err = await failure({ ...valid(), note: { secret: 'p4ssw0rd-value' } });
      expect(JSON.stringify({ message: err.message, details: err.details })).not.toContain('p4ssw0rd-value');
    });

    it('calls a missing required field required, and nothing else', async () => {
      const { amount: _omitted, ...body } = valid();
      const err = await failure(body);
      expect(err.details).toEqual([{ field: 'amount', errors: ['amount is required'] }]);
      expect(err.message).toBe('amount is required');
    });

    it('calls a missing field required inside arrays and nested objects too', async () => {
      const err = await failure({ ...valid(), address: {}, lines: [{ sku: 'a' }] });
      expect(err.details).toEqual([
        { field: 'address.city', errors: ['city is required'] },
        { field: 'lines[0].qty', errors: ['qty is required'] },
      ]);
    });

    it('refuses null in a required field, naming it', async () => {
      const err = await failure({ ...valid(), amount: null });
      expect(err.details).toEqual([{ field: 'amount', errors: ['amount must not be null'] }]);
    });

    it('refuses null in an optional field (absent is fine, null is not a value)', async () => {
      await expect(run({ ...valid() })).resolves.toEqual(valid());
      const err = await failure({ ...valid(), tip: null });
      expect(err.details).toEqual([{ field: 'tip', errors: ['tip must not be null'] }]);
    });

    it('names a null array element with its array, not as a bare index ("0 must not be null")', async () => {
      const err = await failure({ ...valid(), lines: [{ sku: 'a', qty: 1 }, null] });
      expect(err.details).toEqual([{ field: 'lines[1]', errors: ['lines[1] must not be null'] }]);
      expect(err.message).toBe('lines[1] must not be null');
    });

    it('still names an unknown field as such when its value is null', async () => {
      const err = await failure({ ...valid(), admin: null });
      expect(err.details).toEqual([{ field: 'admin', errors: ['property admin should not exist'] }]);
    });

    it.each([
      ['null', null],
      ['missing', undefined],
      ['an array', [valid()]],
      ['a string', 'x'],
      ['a number', 1],
      ['a boolean', true],
    ])('refuses a body that is %s: it must be a JSON object', async (_what, body) => {
      const err = await failure(body);
      expect(err.message).toBe('Request body must be a JSON object');
      expect(err.details).toEqual([{ field: 'body', errors: ['Request body must be a JSON object'] }]);
    });

    it.each(['.', '..'])('refuses %j as a path parameter, naming it', async (dots) => {
      const err: unknown = await runParam({ name: dots }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).details).toEqual([{ field: 'name', errors: [`name must not be "." or ".."`] }]);
      await expect(runParam({ name: '.a.' })).resolves.toEqual({ name: '.a.' });
    });
  });
});
