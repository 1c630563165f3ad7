import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { WorkerRegistry, type WorkerRow } from '../../src/engines/workers/worker-registry';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { startTestApp, type TestApp } from '../support/test-app';

/**
 * docs/background-work.md lists everything that runs in the background. This builds the app, reads what its worker
 * registry found declared (@DelayQueueHandler, @StreamConsumer, @PeriodicJob), and holds the table to exactly that:
 * a worker added, removed or changed in code without its row fails here, with the rows to paste.
 */
const DOC = resolve(__dirname, '../../docs/background-work.md');
const HEADER = ['name', 'trigger', 'lease', 'retry policy', 'dead letter', 'metric'];

/** The rows of the first table whose header is HEADER. */
function documentedRows(markdown: string): string[][] {
  const lines = markdown.split('\n');
  const cells = (line: string) =>
    line
      .trim()
      .replace(/^\||\|$/g, '')
      .split(/(?<!\\)\|/)
      .map((c) => c.trim().replace(/\\\|/g, '|'));
  const at = lines.findIndex((l) => l.trim().startsWith('|') && JSON.stringify(cells(l)) === JSON.stringify(HEADER));
  if (at < 0) throw new Error(`docs/background-work.md has no table headed | ${HEADER.join(' | ')} |`);
  const rows: string[][] = [];
  for (const line of lines.slice(at + 2)) {
    if (!line.trim().startsWith('|')) break;
    rows.push(cells(line));
  }
  return rows;
}

const asCells = (r: WorkerRow) => [`\`${r.name}\``, r.trigger, r.lease, r.retry, r.deadLetter, r.metric];
const asLine = (cells: string[]) => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;

describe('the background-work table', () => {
  let redis: RedisServerHandle;
  let t: TestApp;
  beforeAll(async () => {
    redis = await startRedisServer();
    t = await startTestApp(redis.url);
  });
  afterAll(async () => {
    await t?.close();
    await redis?.destroy();
  });

  it('lists exactly the workers the code declares, as declared', () => {
    const declared = t.app.get(WorkerRegistry).rows().map(asCells);
    const documented = documentedRows(readFileSync(DOC, 'utf8'));
    const expected = declared.map(asLine).join('\n');
    if (JSON.stringify(documented) !== JSON.stringify(declared)) {
      throw new Error(`docs/background-work.md's table differs from the declared workers; the rows as declared:\n\n${expected}\n`);
    }
    // Every kind is there: the table is not trivially equal.
    expect(declared.length).toBeGreaterThanOrEqual(13);
  });

  it('every declared worker runs in the app (periodic jobs, queue processors and consumer groups), none twice', () => {
    const names = t.app.get(WorkerRegistry).names;
    expect(new Set(names).size).toBe(names.length);
    for (const row of t.app.get(WorkerRegistry).rows()) {
      if (row.trigger.includes('one runner per rain')) continue; // started per rain, not at boot
      const [kind, ...rest] = row.name.split(':');
      const running = kind === 'stream' ? names.some((n) => n.startsWith(`streams:${rest[0]}:${rest.slice(1).join(':')}:`)) : names.includes(row.name);
      expect({ worker: row.name, running }).toEqual({ worker: row.name, running: true });
    }
  });
});
