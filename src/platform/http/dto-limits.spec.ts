import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { getMetadataStorage } from 'class-validator';

/**
 * Every request DTO must bound its inputs: strings by length (or a closed
 * set), numbers by a range, arrays by a size. This walks every class in
 * `src/**\/dto/*.ts`, so a feature module that forgets a limit fails here.
 */
const SRC = join(__dirname, '..', '..');
const BOUNDED_STRING = new Set(['maxLength', 'length', 'isIn', 'isEnum', 'isUUID', 'isBoolean', 'isDateString', 'isISO8601']);
const BOUNDED_NUMBER_MAX = new Set(['max']);
const BOUNDED_NUMBER_MIN = new Set(['min', 'isPositive']);
const BOUNDED_ARRAY = new Set(['arrayMaxSize']);

function dtoFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return dtoFiles(p);
    return p.includes(`${join('dto', '')}`) && p.endsWith('.ts') && !p.endsWith('.spec.ts') ? [p] : [];
  });
}

/** Classes that carry class-validator rules, from every dto file. */
function dtoClasses(): Array<[string, new () => object]> {
  const out: Array<[string, new () => object]> = [];
  for (const file of dtoFiles(SRC)) {
    const mod = require(file) as Record<string, unknown>;
    for (const [name, value] of Object.entries(mod)) {
      if (typeof value !== 'function') continue;
      const rules = getMetadataStorage().getTargetValidationMetadatas(value as new () => object, '', true, false);
      if (rules.length > 0) out.push([`${relative(SRC, file)}#${name}`, value as new () => object]);
    }
  }
  return out;
}

/** Problems with one DTO's limits, as `field: problem`. */
function unboundedFields(dto: new () => object): string[] {
  const byField = new Map<string, Set<string>>();
  for (const m of getMetadataStorage().getTargetValidationMetadatas(dto, '', true, false)) {
    const kinds = byField.get(m.propertyName) ?? new Set<string>();
    kinds.add(m.name ?? m.type);
    byField.set(m.propertyName, kinds);
  }
  const problems: string[] = [];
  for (const [field, kinds] of byField) {
    const has = (set: Set<string>) => [...kinds].some((k) => set.has(k));
    if (kinds.has('isString') && !has(BOUNDED_STRING)) problems.push(`${field}: string without MaxLength/Length/IsIn`);
    if ((kinds.has('isInt') || kinds.has('isNumber')) && !(has(BOUNDED_NUMBER_MAX) && has(BOUNDED_NUMBER_MIN)))
      problems.push(`${field}: number without Min and Max`);
    if (kinds.has('isArray') && !has(BOUNDED_ARRAY)) problems.push(`${field}: array without ArrayMaxSize`);
    // ValidateNested checks an array found where an object goes element by element, so `[]` there passes it.
    if (kinds.has('nestedValidation') && !kinds.has('isObject')) problems.push(`${field}: ValidateNested without IsObject`);
  }
  return problems;
}

describe('request DTO limits', () => {
  const classes = dtoClasses();

  it('finds the DTOs', () => {
    expect(classes.map(([name]) => name)).toContain('platform/diagnostics/dto/touch.dto.ts#TouchDto');
  });

  it.each(classes)('%s bounds every string, number and array, and checks nested values are objects', (_name, dto) => {
    expect(unboundedFields(dto)).toEqual([]);
  });

  it('notices an unbounded field (the check itself can fail)', () => {
    const { IsString, IsInt, IsArray, ArrayMaxSize, ValidateNested } = require('class-validator');
    class Loose {
      @IsString() name!: string;
      @IsInt() count!: number;
      @IsArray() items!: string[];
      @IsArray() @ArrayMaxSize(3) @ValidateNested({ each: true }) parts!: object[];
    }
    expect(unboundedFields(Loose)).toEqual([
      'name: string without MaxLength/Length/IsIn',
      'count: number without Min and Max',
      'items: array without ArrayMaxSize',
      'parts: ValidateNested without IsObject',
    ]);
  });
});
