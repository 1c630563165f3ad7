import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseEnv } from 'node:util';
import { getMetadataStorage } from 'class-validator';
import { EnvSchema } from './env.schema';
import { loadConfig } from './load-config';

describe('.env.example', () => {
  const text = readFileSync(resolve(__dirname, '../../.env.example'), 'utf8');
  const parsed = parseEnv(text) as Record<string, string>;

  it('lists every setting the service reads, and nothing else', () => {
    const schemaKeys = new Set(getMetadataStorage().getTargetValidationMetadatas(EnvSchema, '', true, false).map((m) => m.propertyName));
    expect(Object.keys(parsed).sort()).toEqual([...schemaKeys].sort());
  });

  it('loads as a valid development configuration with the documented defaults', () => {
    const fromExample = loadConfig(parsed);
    const fromNothing = loadConfig({});
    expect(fromExample).toEqual(fromNothing);
  });
});
