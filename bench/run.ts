/**
 * `npm run bench -- <name> [args...]` runs `bench/<name>.ts`, whose `main(args)` does the work (the benchmarks are
 * the .ts files directly in bench/, except this runner and the servers they start). `dist/` is already built (`nest
 * build` runs first). Exit codes: 0 done, 1 failed (a `--compare` that found a regression included), 2 usage.
 */
import { readdirSync } from 'node:fs';
import { cleanupAll } from './lib/cleanup';
import { BenchCheckFailed } from './lib/report';

async function run(name: string | undefined, args: string[]): Promise<number> {
  const names = readdirSync(__dirname)
    .filter((f) => f.endsWith('.ts') && f !== 'run.ts' && !f.endsWith('-server.ts'))
    .map((f) => f.slice(0, -3));
  if (!name || !names.includes(name)) {
    console.error(
      `${name ? `Unknown benchmark "${name}".` : 'Which benchmark?'}\nUsage: npm run bench -- <name> [options]\nAvailable: ${names.sort().join(', ')}`,
    );
    return 2;
  }
  try {
    await ((await import(`./${name}`)) as { main(args: string[]): Promise<void> }).main(args);
    return 0;
  } catch (err) {
    // A --compare that found a regression: the message says it all.
    if (err instanceof BenchCheckFailed) console.error(`\n[bench] ${name} --compare FAILED\n${err.message}\n`);
    else console.error(`[bench] ${name} failed:`, err instanceof Error ? (err.stack ?? err.message) : err);
    return 1;
  } finally {
    await cleanupAll();
  }
}

void run(process.argv[2], process.argv.slice(3)).then((code) => process.exit(code));
