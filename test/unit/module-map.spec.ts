import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * docs/architecture.md's module map against the code: every module folder under src/<layer>/ is a node of the
 * map, and the arrows between engines and features are exactly the imports scripts/module-map.mjs finds.
 */
const ROOT = join(__dirname, '..', '..');

function fromCode(): { folders: string[]; edges: string[] } {
  const run = spawnSync(process.execPath, [join(ROOT, 'scripts', 'module-map.mjs'), '--json'], { cwd: ROOT, encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`module-map.mjs failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as { folders: string[]; edges: string[] };
}

/** The map in the doc: nodes as `<layer>/<label>`, arrows as `<layer>/<a> --> <layer>/<b>`. */
function fromDoc(): { folders: string[]; edges: string[] } {
  const doc = readFileSync(join(ROOT, 'docs', 'architecture.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Module map'));
  const chart = /```mermaid\n([\s\S]*?)```/.exec(section)![1];
  const layerOf = new Map<string, string>();
  const folders: string[] = [];
  let layer = '';
  const edges: string[] = [];
  for (const line of chart.split('\n').map((l) => l.trim())) {
    const sub = /^subgraph (\w+)/.exec(line);
    if (sub) layer = sub[1];
    else if (line === 'end') layer = '';
    const node = /^(\w+)\["([a-z-]+)"\]$/.exec(line);
    if (node && layer) {
      layerOf.set(node[1], `${layer}/${node[2]}`);
      folders.push(`${layer}/${node[2]}`);
    }
    const arrow = /^(\w+) --> (\w+)$/.exec(line);
    if (arrow && layerOf.has(arrow[1]) && layerOf.has(arrow[2])) edges.push(`${layerOf.get(arrow[1])} --> ${layerOf.get(arrow[2])}`);
  }
  return { folders: folders.sort(), edges: edges.sort() };
}

describe('the module map in docs/architecture.md', () => {
  const code = fromCode();
  const doc = fromDoc();

  it('finds the layers in the code', () => {
    expect(code.folders).toEqual(expect.arrayContaining(['platform/http', 'engines/delay-queue', 'features/seckill', 'features/red-envelope']));
    expect(code.edges).toContain('features/seckill --> features/orders');
  });

  it('shows every module folder, in its layer, and no folder that is gone', () => {
    expect(doc.folders).toEqual(code.folders);
  });

  it('draws exactly the imports between engines and features', () => {
    expect(doc.edges).toEqual(code.edges);
  });
});
