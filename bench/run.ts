/**
 * `npm run bench -- <name> [args...]` runs `bench/<name>.ts`, whose `main(args)`
 * does the work. `dist/` is already built (`nest build` runs first). Exit codes: 0 done, 1 failed
 * (a `--compare` that found a regression included), 2 usage.
 */
import { readdirSync } from 'node:fs';
import { cleanupAll } from './lib/cleanup';
import { BenchCheckFailed } from './lib/results-json';

interface BenchModule {
  main(args: string[]): Promise<void>;
}

/** Benchmarks are the .ts files directly in bench/, except this runner and the servers they start. */
function available(): string[] {
  return readdirSync(__dirname)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && f !== 'run.ts' && !f.endsWith('-server.ts'))
    .map((f) => f.slice(0, -'.ts'.length))
    .sort();
}

async function run(): Promise<number> {
  const [name, ...args] = process.argv.slice(2);
  const names = available();
  if (!name || !names.includes(name)) {
    console.error(name ? `Unknown benchmark "${name}".` : 'Which benchmark?');
    console.error(`Usage: npm run bench -- <name> [options]\nAvailable: ${names.join(', ') || '(none)'}`);
    return 2;
  }
  const mod = (await import(`./${name}`)) as BenchModule;
  if (typeof mod.main !== 'function') {
    console.error(`bench/${name}.ts does not export main(args)`);
    return 2;
  }
  try {
    await mod.main(args);
    return 0;
  } catch (err) {
    if (err instanceof BenchCheckFailed) {
      // A --compare that found a regression: the message says it all.
      console.error(`\n[bench] ${name} --compare FAILED\n${err.message}\n`);
      return 1;
    }
    console.error(`[bench] ${name} failed:`, err instanceof Error ? (err.stack ?? err.message) : err);
    return 1;
  } finally {
    await cleanupAll();
  }
}

run().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    void cleanupAll().finally(() => process.exit(1));
  },
);
