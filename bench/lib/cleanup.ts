/**
 * Everything a benchmark starts (redis-server, server processes, temp dirs) registers its teardown here, so it is
 * undone on a normal end, on an error and on Ctrl-C / SIGTERM. A last synchronous pass on 'exit' SIGKILLs what is left.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** `last` must be synchronous: it runs inside process.on('exit'). */
type Entry = { name: string; graceful: () => Promise<void> | void; last: () => void };
const entries: Entry[] = [];
let running: Promise<void> | undefined;
const quietly = (f: () => void) => {
  try {
    f();
  } catch {
    /* best effort */
  }
};

/** Registers a teardown; returns a function that unregisters it (after the caller cleaned up itself). */
export function onCleanup(name: string, graceful: Entry['graceful'], last: Entry['last']): () => void {
  if (!process.listeners('exit').includes(exitPass)) {
    process.on('exit', exitPass);
    for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const)
      process.once(sig, () => {
        console.error(`\n[bench] ${sig}: stopping everything this benchmark started`);
        setTimeout(() => process.exit(130), 5000).unref();
        void cleanupAll().finally(() => process.exit(130));
      });
  }
  const entry = { name, graceful, last };
  entries.push(entry);
  return () => void (entries.includes(entry) && entries.splice(entries.indexOf(entry), 1));
}

function exitPass(): void {
  entries
    .splice(0)
    .reverse()
    .forEach((e) => quietly(e.last));
}

/** Runs every registered teardown, newest first. Safe to call more than once. */
export function cleanupAll(): Promise<void> {
  running ??= (async () => {
    for (let e = entries.pop(); e; e = entries.pop())
      await Promise.resolve()
        .then(e.graceful)
        .catch((err: Error) => (console.error(`[bench] cleanup of ${e!.name} failed: ${err.message}; forcing`), quietly(e!.last)));
  })().finally(() => (running = undefined));
  return running;
}

/** A fresh temporary directory (`$TMPDIR/<prefix>XXXXXX`) for one run, removed at cleanup however the run ends. */
export function benchWorkDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  onCleanup(`bench work dir ${dir}`, remove, remove);
  return dir;
}
