import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RedEnvelopeEnv } from '../../features/red-envelope/red-envelope.config';
import { SeckillEnv } from '../../features/seckill/seckill.config';
import { settingsOf } from './settings';

/** The fields a settings class declares (`name!: type;`), read from its source: what the built settings must hold. */
function declaredFields(file: string, className: string): string[] {
  const src = readFileSync(join(__dirname, '..', '..', 'features', file), 'utf8');
  const body = src.slice(src.indexOf(`export class ${className} {`)).split('\n}')[0];
  return [...body.matchAll(/^\s+(\w+)!:/gm)].map((m) => m[1]).sort();
}

describe('settings built from @Setting declarations', () => {
  it.each([
    ['seckill/seckill.config.ts', 'SeckillConfig', SeckillEnv],
    ['red-envelope/red-envelope.config.ts', 'RedEnvelopeConfig', RedEnvelopeEnv],
  ] as const)('%s: every field of %s is made by one variable, with a number', (file, className, env) => {
    const fields = declaredFields(file, className);
    const built = settingsOf<Record<string, number>, object>(env as never)({});
    expect(fields.length).toBeGreaterThan(3);
    expect(Object.keys(built).sort()).toEqual(fields);
    for (const f of fields) expect(Number.isFinite(built[f])).toBe(true);
  });
});
