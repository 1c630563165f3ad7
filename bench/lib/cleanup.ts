/**
 * Everything a benchmark starts (redis-server, server processes, temp dirs)
 * registers its teardown here, so it is undone on a normal end, on an error
 * and on Ctrl-C / SIGTERM. A last synchronous pass on process 'exit' SIGKILLs
 * whatever is still running.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

type AsyncTask = () => Promise<void> | void;
type SyncTask = () => void;

interface Entry {
  name: string;
  graceful: AsyncTask;
  /** Must be synchronous: runs inside process.on('exit'). */
  last: SyncTask;
}

const entries: Entry[] = [];
let installed = false;
let running: Promise<void> | undefined;

/** Registers a teardown; returns a function that unregisters it (after the caller cleaned up itself). */
export function onCleanup(name: string, graceful: AsyncTask, last: SyncTask): () => void {
  installHandlers();
  const entry: Entry = { name, graceful, last };
  entries.push(entry);
  return () => {
    const i = entries.indexOf(entry);
    if (i >= 0) entries.splice(i, 1);
  };
}

/** Runs every registered teardown, newest first. Safe to call more than once. */
export function cleanupAll(): Promise<void> {
  running ??= (async () => {
    while (entries.length > 0) {
      const e = entries.pop()!;
      try {
        await e.graceful();
      } catch (err) {
        console.error(`[bench] cleanup of ${e.name} failed: ${(err as Error).message}; forcing`);
        try {
          e.last();
        } catch {
          /* nothing more to do */
        }
      }
    }
  })().finally(() => {
    running = undefined;
  });
  return running;
}

function installHandlers(): void {
  if (installed) return;
  installed = true;
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      console.error(`\n[bench] ${sig}: stopping everything this benchmark started`);
      const force = setTimeout(() => process.exit(130), 5000);
      force.unref();
      void cleanupAll().finally(() => process.exit(130));
    });
  }
  process.on('exit', () => {
    for (const e of entries.splice(0).reverse()) {
      try {
        e.last();
      } catch {
        /* best effort */
      }
    }
  });
}

/** A fresh temporary directory (`$TMPDIR/<prefix>XXXXXX`) for one run, removed at cleanup however the run ends. */
export function benchWorkDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  onCleanup(`bench work dir ${dir}`, remove, remove);
  return dir;
}
