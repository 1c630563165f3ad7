#!/usr/bin/env node
// The module map of docs/architecture.md, drawn from the code: cruises src/ with the rules' options and prints the
// module folders (src/<layer>/<name>/) by layer with the imports between engines and features, as a Mermaid chart
// (`node scripts/module-map.mjs`), or as JSON (`--json`: { folders, edges }) for the test that holds the doc to it.
import { cruise } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';
import { readdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { folderEdges } from './check-deps.mjs';

const LAYERS = ['platform', 'engines', 'features'];

/** Every module folder under src/, as `<layer>/<name>`. */
export function moduleFolders(root = 'src') {
  return LAYERS.flatMap((layer) =>
    readdirSync(resolve(root, layer), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => `${layer}/${d.name}`),
  ).sort();
}

/** Imports between module folders that the map draws: an engine's or a feature's, to an engine or a feature. */
export async function moduleEdges() {
  const options = await extractDepcruiseOptions(resolve('.dependency-cruiser.cjs'));
  const tsConfig = extractTSConfig(resolve(options.tsConfig?.fileName ?? 'tsconfig.json'));
  const { output } = await cruise(['src'], { ...options, outputType: 'json' }, undefined, { tsConfig });
  const edges = [];
  for (const [from, tos] of folderEdges(JSON.parse(output).modules)) {
    for (const to of tos.keys()) if (!from.startsWith('platform/') && !to.startsWith('platform/')) edges.push(`${from} --> ${to}`);
  }
  return edges.sort();
}

function mermaid(folders, edges) {
  const id = (f) => f.split('/')[1].replace(/-/g, '_');
  const lines = ['flowchart TB'];
  for (const layer of [...LAYERS].reverse()) {
    lines.push(`  subgraph ${layer}`);
    for (const f of folders.filter((x) => x.startsWith(`${layer}/`))) lines.push(`    ${id(f)}["${f.split('/')[1]}"]`);
    lines.push('  end');
  }
  for (const e of edges) {
    const [a, b] = e.split(' --> ');
    lines.push(`  ${id(a)} --> ${id(b)}`);
  }
  lines.push('  features --> platform', '  engines --> platform');
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const folders = moduleFolders();
  const edges = await moduleEdges();
  console.log(process.argv.includes('--json') ? JSON.stringify({ folders, edges }) : mermaid(folders, edges));
}
