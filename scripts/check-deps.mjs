#!/usr/bin/env node
// The dependency rules of `npm run lint`: cruises src/ with dependency-cruiser and the rules of
// .dependency-cruiser.cjs (file cycles, features only through public files, platform and engines
// never importing a feature, every folder classified), then fails on any cycle between the folders
// of src/ (a folder = src/<layer>/<name>/ with everything below it; *.spec.ts left out, as the
// proofs may import what they prove). Usage: node scripts/check-deps.mjs [config file], run in the
// project root (the rules' paths start with src/).
import { cruise, format } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';
import { resolve } from 'node:path';

/** Edges between top folders of src/, each with one example import: Map<from, Map<to, example>>. */
export function folderEdges(modules) {
  const top = (path) => /^src\/((?:platform|engines|features)\/[^/]+)\//.exec(path)?.[1];
  const edges = new Map();
  for (const m of modules) {
    const a = top(m.source);
    if (!a || /\.spec\.ts$/.test(m.source)) continue;
    for (const d of m.dependencies) {
      const b = top(d.resolved);
      if (!b || a === b) continue;
      if (!edges.has(a)) edges.set(a, new Map());
      if (!edges.get(a).has(b)) edges.get(a).set(b, `${m.source} → ${d.resolved}`);
    }
  }
  return edges;
}

/** Groups of two or more folders that reach each other (strongly connected components, Tarjan). */
export function folderCycles(edges) {
  const nodes = [...new Set([...edges.keys(), ...[...edges.values()].flatMap((m) => [...m.keys()])])];
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const groups = [];
  let next = 0;
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of (edges.get(v) ?? new Map()).keys()) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) !== index.get(v)) return;
    const group = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      group.push(w);
    } while (w !== v);
    if (group.length > 1) groups.push(group.sort());
  };
  for (const v of nodes) if (!index.has(v)) visit(v);
  return groups;
}

async function main() {
  const options = await extractDepcruiseOptions(resolve(process.argv[2] ?? '.dependency-cruiser.cjs'));
  const tsConfig = extractTSConfig(resolve(options.tsConfig?.fileName ?? 'tsconfig.json'));
  const { output } = await cruise(['src'], { ...options, outputType: 'json' }, undefined, { tsConfig });
  const result = JSON.parse(output);
  const report = await format(result, { outputType: 'err' });
  let failed = result.summary.error > 0;
  if (failed) process.stdout.write(report.output);

  const edges = folderEdges(result.modules);
  const groups = folderCycles(edges);
  for (const group of groups) {
    console.log(`  error no-folder-cycles: ${group.join(' ↔ ')}`);
    for (const a of group) for (const [b, example] of edges.get(a) ?? []) if (group.includes(b)) console.log(`      ${a} → ${b}: ${example}`);
  }
  failed ||= groups.length > 0;
  const folders = new Set([...edges.keys(), ...[...edges.values()].flatMap((m) => [...m.keys()])]).size;
  console.log(
    failed
      ? `✘ dependency rules: ${result.summary.error} rule violation(s), ${groups.length} folder cycle group(s)`
      : `✔ dependency rules: no violations, no folder cycles (${result.summary.totalCruised} modules, ${folders} module folders under src/)`,
  );
  process.exitCode = failed ? 1 : 0;
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
