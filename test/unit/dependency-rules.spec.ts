import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * The dependency rules of `npm run lint` (scripts/check-deps.mjs with .dependency-cruiser.cjs),
 * run on a small tree that keeps them, then on the same tree with one violation planted per rule:
 * each planted violation fails the check and is named by its rule.
 */
const ROOT = join(__dirname, '..', '..');
const CHECK = join(ROOT, 'scripts', 'check-deps.mjs');
const CONFIG = join(ROOT, '.dependency-cruiser.cjs');

/** A tree that keeps every rule: platform below engines below features, one feature reaching another through its public file. */
const CLEAN: Record<string, string> = {
  'src/platform/core/ids.ts': `export const ID = 'id';\n`,
  'src/platform/http/api.error.ts': `import { ID } from '../core/ids';\nexport const E = ID;\n`,
  'src/engines/delay-queue/queue.ts': `import { E } from '../../platform/http/api.error';\nexport const Q = E;\n`,
  'src/features/wallet/wallet.service.ts': `import { Q } from '../../engines/delay-queue/queue';\nexport const W = Q;\n`,
  'src/features/wallet/index.ts': `export { W } from './wallet.service';\n`,
  'src/features/orders/orders.service.ts': `import { W } from '../wallet';\nexport const O = W;\n`,
  'src/features/orders/index.ts': `export { O } from './orders.service';\n`,
  // A spec may import any feature's internals (the key-space proof does).
  'src/platform/redis/keys.spec.ts': `import { O } from '../../features/orders/orders.service';\nexport const K = O;\n`,
};

function check(planted: Record<string, string>): { status: number | null; output: string } {
  const dir = mkdtempSync(join(tmpdir(), 'dependency-rules-'));
  try {
    const files = { ...CLEAN, ...planted, 'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'commonjs', strict: true } }) };
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    const run = spawnSync(process.execPath, [CHECK, CONFIG], { cwd: dir, encoding: 'utf8' });
    return { status: run.status, output: `${run.stdout}${run.stderr}` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('dependency rules (npm run lint)', () => {
  it('passes a tree that keeps them', () => {
    const { status, output } = check({});
    expect(output).toContain('no violations, no folder cycles');
    expect(status).toBe(0);
  });

  it.each([
    [
      'no-circular',
      'a file cycle',
      {
        'src/features/orders/a.ts': `import { B } from './b';\nexport const A = B;\n`,
        'src/features/orders/b.ts': `import type { A } from './a';\nexport const B = 1 as unknown as typeof A;\n`,
      },
    ],
    [
      'no-folder-cycles',
      'a cycle between folders (core → http → core)',
      { 'src/platform/core/money.ts': `import { E } from '../http/api.error';\nexport const M = E;\n` },
    ],
    [
      'no-folder-cycles',
      'a cycle between two features through their public files',
      {
        'src/features/wallet/wallet.views.ts': `import { O } from '../orders';\nexport const V = O;\n`,
        'src/features/wallet/index.ts': `export { W } from './wallet.service';\nexport { V } from './wallet.views';\n`,
      },
    ],
    [
      'feature-through-public-file',
      "a feature importing another's internal file",
      { 'src/features/orders/pay.ts': `import { W } from '../wallet/wallet.service';\nexport const P = W;\n` },
    ],
    [
      'no-own-public-file',
      "a file importing its own folder's public file",
      { 'src/features/orders/view.ts': `import { O } from './index';\nexport const V = O;\n` },
    ],
    [
      'platform-not-to-feature',
      'platform importing a feature',
      { 'src/platform/http/examples.ts': `import { O } from '../../features/orders';\nexport const X = O;\n` },
    ],
    [
      'platform-not-to-engine',
      'platform importing an engine',
      { 'src/platform/http/queue-link.ts': `import { Q } from '../../engines/delay-queue/queue';\nexport const X = Q;\n` },
    ],
    [
      'engine-not-to-feature',
      'an engine importing a feature',
      { 'src/engines/delay-queue/handlers.ts': `import { W } from '../../features/wallet';\nexport const H = W;\n` },
    ],
    ['unclassified-folder', 'a folder in no layer', { 'src/newthing/thing.ts': `import { ID } from '../platform/core/ids';\nexport const T = ID;\n` }],
  ])('fails on %s: %s', (rule, _what, planted) => {
    const { status, output } = check(planted);
    expect(output).toContain(`error ${rule}`);
    expect(status).toBe(1);
  });
});
