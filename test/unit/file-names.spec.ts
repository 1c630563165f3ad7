import { readdirSync } from 'node:fs';
import { basename, join } from 'node:path';

/**
 * One file-naming scheme under src/: `<name>.<kind>.ts`, the kind after a dot (`seckill.keys.ts`, `order.errors.ts`,
 * `locks.controller.ts`), and no two modules holding a file of the same name (`index.ts` aside).
 */
const SRC = join(__dirname, '..', '..', 'src');
const FILES = (readdirSync(SRC, { recursive: true }) as string[]).map((f) => f.split('\\').join('/')).filter((f) => f.endsWith('.ts'));
const KINDS = [
  'service',
  'controller',
  'module',
  'store',
  'keys',
  'shapes',
  'errors',
  'error',
  'metrics',
  'types',
  'dto',
  'guard',
  'filter',
  'decorators',
  'scripts',
  'commands',
  'command',
  'views',
  'events',
  'status',
  'args',
];
const DASHED_KIND = new RegExp(`-(${KINDS.join('|')})(\\.spec)?\\.ts$`);

describe('file names under src/', () => {
  it('finds the files', () => {
    expect(FILES).toEqual(expect.arrayContaining(['features/seckill/seckill.keys.ts', 'features/orders/order.errors.ts']));
  });

  it('put the kind after a dot, never after a dash', () => {
    expect(FILES.filter((f) => DASHED_KIND.test(f))).toEqual([]);
  });

  it('are unique across modules', () => {
    const seen = new Map<string, string[]>();
    for (const f of FILES.filter((x) => basename(x) !== 'index.ts')) seen.set(basename(f), [...(seen.get(basename(f)) ?? []), f]);
    expect([...seen.values()].filter((paths) => paths.length > 1)).toEqual([]);
  });
});
