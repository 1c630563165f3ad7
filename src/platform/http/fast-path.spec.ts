import 'reflect-metadata';
import { ValidationPipe } from '@nestjs/common';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import { Transform, Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
  ValidateIf,
  ValidateNested,
  Validate,
  type ValidatorConstraintInterface,
  ValidatorConstraint,
} from 'class-validator';
import fc from 'fast-check';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fastPathFor, fastPathValue } from './fast-path';
import { IsOptionalField } from './optional-field';
import { QueryInt, validationPipeOptions } from './validation';

class LineDto {
  @IsString()
  @MinLength(1)
  @MaxLength(8)
  sku!: string;

  @IsInt()
  @Min(1)
  @Max(100)
  qty!: number;
}

class AddressDto {
  @IsString()
  @Matches(/^[A-Z][a-z]+$/)
  city!: string;

  @IsOptionalField()
  @IsString({ each: true })
  @ArrayMaxSize(2)
  lines?: string[];
}

class OrderDto {
  @IsInt()
  @Min(1)
  amount!: number;

  @IsOptional()
  @IsString()
  note?: string;

  @IsOptionalField()
  @IsIn(['a', 'b'])
  mode?: string;

  @ValidateIf((o: OrderDto) => o.mode === 'b')
  @IsString()
  @MinLength(2)
  onlyForB?: string;

  @ValidateNested()
  @Type(() => AddressDto)
  address!: AddressDto;

  @IsArray()
  @ArrayMaxSize(3)
  @ValidateNested({ each: true })
  @Type(() => LineDto)
  lines!: LineDto[];
}

const slow = new ValidationPipe(validationPipeOptions());
const slowAccepts = (metatype: unknown, body: unknown) =>
  slow.transform(body, { type: 'body', metatype: metatype as never, data: undefined }).then(
    () => true,
    () => false,
  );

const anyValue = fc.constantFrom<unknown>(
  undefined,
  null,
  0,
  1,
  101,
  -1,
  1.5,
  '',
  'x',
  'Oslo',
  'oslo',
  'a',
  'b',
  'bb',
  'x'.repeat(9),
  true,
  [],
  {},
  ['x'],
  ['x', 'y', 'z'],
  { city: 'Oslo' },
  [{}],
  [1],
);
const ABSENT = Symbol('absent');
const maybe = <T>(arb: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 6, arbitrary: arb }, { weight: 2, arbitrary: anyValue }, { weight: 1, arbitrary: fc.constant(ABSENT) });
const line = fc.record({
  sku: maybe(fc.string({ minLength: 1, maxLength: 9 })),
  qty: maybe(fc.integer({ min: 0, max: 101 })),
  extra: fc.constantFrom(ABSENT, ABSENT, ABSENT, 1),
});
const strip = (r: Record<string, unknown>) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== ABSENT));
const order = fc
  .record({
    amount: maybe(fc.integer({ min: 0, max: 5 })),
    note: maybe(fc.string()),
    mode: maybe(fc.constantFrom('a', 'b', 'c')),
    onlyForB: maybe(fc.string({ maxLength: 3 })),
    address: maybe(
      fc.record({ city: maybe(fc.constantFrom('Oslo', 'oslo', 'Rome')), lines: maybe(fc.array(fc.string({ maxLength: 2 }), { maxLength: 3 })) }).map(strip),
    ),
    lines: maybe(fc.array(line.map(strip), { maxLength: 4 })),
    extra: fc.constantFrom(ABSENT, ABSENT, ABSENT, ABSENT, 'x'),
  })
  .map(strip);

describe('fastPathFor', () => {
  const fast = fastPathFor(OrderDto)!;

  it('never accepts what class-validator refuses, and takes most of what it accepts', async () => {
    let bothAccepted = 0;
    let slowOnly = 0;
    await fc.assert(
      fc.asyncProperty(order, async (b) => {
        const ok = await slowAccepts(OrderDto, b);
        if (fast(b)) {
          expect(ok).toBe(true);
          bothAccepted++;
        } else if (ok) slowOnly++;
      }),
      { numRuns: 5_000, seed: 20261124 },
    );
    expect(bothAccepted).toBeGreaterThan(50);
    // Nothing class-validator accepts is left to it: the fast path models these rules completely.
    expect(slowOnly).toBe(0);
  });

  it('refuses null in a field that may only be absent, and unknown fields at any depth', () => {
    const ok = { amount: 1, address: { city: 'Oslo' }, lines: [{ sku: 'a', qty: 1 }] };
    expect(fast(ok)).toBe(true);
    expect(fast({ ...ok, mode: null })).toBe(false);
    expect(fast({ ...ok, note: null })).toBe(true); // class-validator's own @IsOptional skips null
    expect(fast({ ...ok, address: { city: 'Oslo', x: 1 } })).toBe(false);
    expect(fast({ ...ok, lines: [{ sku: 'a', qty: 1, x: 1 }] })).toBe(false);
    expect(fast({ ...ok, lines: [null] })).toBe(false);
    expect(fast({ ...ok, lines: [[{ sku: 'a', qty: 1 }]] })).toBe(false);
    expect(fast(null)).toBe(false);
    expect(fast([ok])).toBe(false);
  });

  it('gives no fast path to a class using what it does not model', () => {
    class WithTransform {
      @Transform(({ value }: { value: unknown }) => String(value))
      @IsString()
      a!: string;
    }
    class WithGroups {
      @IsString({ groups: ['x'] })
      a!: string;
    }
    @ValidatorConstraint({ async: true })
    class AsyncRule implements ValidatorConstraintInterface {
      validate() {
        return Promise.resolve(true);
      }
    }
    class WithAsync {
      @Validate(AsyncRule)
      a!: string;
    }
    class WithDefault {
      @IsString()
      a: string = 'x';
    }
    class NoRules {
      a!: string;
    }
    class NestedWithoutType {
      @ValidateNested()
      a!: LineDto;
    }
    class TypeWithoutNested {
      @Type(() => Date)
      @IsString()
      a!: string;
    }
    for (const cls of [WithTransform, WithGroups, WithAsync, WithDefault, NoRules, NestedWithoutType, TypeWithoutNested])
      expect(fastPathFor(cls)).toBeUndefined();
    expect(fastPathFor(String)).toBeUndefined();
  });

  it('covers the body, path and query DTO of every route, query DTOs converting integers included', () => {
    const covered: string[] = [];
    const uncovered: string[] = [];
    for (const [name, dto] of routeDtos()) (fastPathFor(dto) ? covered : uncovered).push(name);
    expect(covered.length).toBeGreaterThan(10);
    expect(covered.filter((n) => / query /.test(n)).length).toBeGreaterThan(3);
    expect(uncovered).toEqual([]);
  });

  it('hands on a query with its @QueryInt() fields converted, as class-transformer and the pipe would', async () => {
    class PageQuery {
      @IsOptionalField() @IsString() after?: string;
      @IsOptionalField() @QueryInt() @IsInt() @Min(1) @Max(100) limit?: number;
    }
    const meta = { type: 'query' as const, metatype: PageQuery };
    for (const query of [{ limit: '20' }, { limit: '7', after: '12' }, { after: '3' }, {}]) {
      const fast = fastPathValue(PageQuery, query);
      expect(fast).toBeDefined();
      expect(fast).toEqual({ ...(await new ValidationPipe(validationPipeOptions()).transform(query, meta)) });
    }
    expect(fastPathValue(PageQuery, { limit: '20' })).toEqual({ limit: 20 });
    expect(fastPathValue(PageQuery, {})).toEqual({});
    // What the conversion leaves a string, or turns into a number the rules refuse, is left to class-validator's 400.
    for (const limit of ['0x10', '1e1', ' 5', '0', '101', ['1', '2']]) expect(fastPathValue(PageQuery, { limit })).toBeUndefined();
    expect(fastPathValue(PageQuery, { limit: '5', extra: '1' })).toBeUndefined();
    // The query object itself is not changed.
    const query = { limit: '20' };
    fastPathValue(PageQuery, query);
    expect(query).toEqual({ limit: '20' });
  });
});

/** `<Controller>.<method> <kind> <Dto>` → Dto, for every @Body(), @Param() and @Query() DTO in src/. */
// eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
type Class = Function;

function routeDtos(): [string, Class][] {
  const found: [string, Class][] = [];
  const kinds: Record<number, string> = { [RouteParamtypes.BODY]: 'body', [RouteParamtypes.PARAM]: 'param', [RouteParamtypes.QUERY]: 'query' };
  for (const file of walk(join(__dirname, '..', '..')).filter((f) => f.endsWith('.controller.ts'))) {
    for (const ctrl of Object.values(require(file) as Record<string, unknown>)) {
      if (typeof ctrl !== 'function') continue;
      for (const method of Object.getOwnPropertyNames(ctrl.prototype)) {
        const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, ctrl, method) ?? {}) as Record<string, { index: number; data?: unknown }>;
        const types = (Reflect.getMetadata('design:paramtypes', ctrl.prototype, method) ?? []) as Class[];
        for (const [key, { index, data }] of Object.entries(args)) {
          const kind = kinds[Number(key.split(':')[0])];
          const dto = types[index];
          if (kind && data === undefined && dto && ![String, Number, Boolean, Object].includes(dto as never))
            found.push([`${ctrl.name}.${method} ${kind} ${dto.name}`, dto]);
        }
      }
    }
  }
  return found;
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? walk(p) : [p];
  });
}
