import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseEnv } from 'node:util';
import { MANAGED_REDIS_VARIABLES } from '../../../scripts/dev/managed-redis';
import { ConfigSlice, configSlices, isConfigSlice } from './config-slice';
import { EnvSchema } from './env.schema';
import { envVariables } from './env-validation';
import { loadConfig } from './load-config';

const SRC = resolve(__dirname, '..', '..');
/** Every module's config slice file, found by name (`src/<module>/<module>.config.ts`), not from a list. */
const sliceFiles = (readdirSync(SRC, { recursive: true }) as string[]).filter((f) => f.endsWith('.config.ts')).sort();

describe('.env.example', () => {
  const text = readFileSync(resolve(__dirname, '../../../.env.example'), 'utf8');
  const parsed = parseEnv(text) as Record<string, string>;
  let slices: ConfigSlice<unknown>[];

  beforeAll(async () => {
    slices = [];
    for (const file of sliceFiles) {
      const exported = Object.values((await import(join(SRC, file))) as Record<string, unknown>).filter(isConfigSlice);
      expect({ file, slices: exported.length }).toEqual({ file, slices: 1 });
      slices.push(...exported);
    }
  });

  it('finds the config slices of the modules', () => {
    expect(sliceFiles).toEqual(
      expect.arrayContaining([
        join('features', 'orders', 'orders.config.ts'),
        join('features', 'messages', 'messages.config.ts'),
        join('engines', 'locks', 'locks.config.ts'),
      ]),
    );
    expect(new Set(configSlices())).toEqual(new Set(slices));
  });

  it("lists every setting the service reads (the platform and every slice), the development launcher's, and nothing else", () => {
    const variables = [EnvSchema, ...slices.map((s) => s.schema)].flatMap((schema) => envVariables(schema));
    expect(new Set(variables).size).toBe(variables.length);
    for (const launcherOnly of MANAGED_REDIS_VARIABLES) expect(variables).not.toContain(launcherOnly); // the service never reads them
    expect(Object.keys(parsed).sort()).toEqual([...variables, ...MANAGED_REDIS_VARIABLES].sort());
  });

  it('loads as a valid development configuration with the documented defaults', () => {
    const fromExample = loadConfig(parsed);
    const fromNothing = loadConfig({});
    expect([...fromExample.slices.keys()].sort()).toEqual(slices.map((s) => s.name).sort());
    expect(fromExample).toEqual(fromNothing);
  });
});
