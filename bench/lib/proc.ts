import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { type Agent, request } from 'node:http';
import { onCleanup } from './cleanup';

export { freePort } from '../../test/harness/free-port';

/** Kernel clock ticks per second (USER_HZ), for /proc figures. */
const hz = () => (ticks ??= Number(tryOr(() => execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }), '100')) || 100);
let ticks: number | undefined;
const tryOr = <T>(f: () => T, or: T): T => {
  try {
    return f();
  } catch {
    return or;
  }
};

/** CPU time (user + system, seconds) used so far by one process, or undefined where /proc is missing. */
export function cpuSeconds(pid: number | undefined): number | undefined {
  if (!pid) return undefined;
  // Fields after the command name, which is in parentheses and may contain spaces.
  const rest = tryOr(() => readFileSync(`/proc/${pid}/stat`, 'utf8'), '')
    .split(') ')[1]
    ?.split(' ');
  return rest ? (Number(rest[11]) + Number(rest[12])) / hz() : undefined;
}

/** CPU seconds used so far by `pid` and every process below it. */
export function treeCpuSeconds(pid: number): number | undefined {
  const own = cpuSeconds(pid);
  if (own === undefined) return undefined;
  const children = tryOr(
    () => readdirSync(`/proc/${pid}/task`).flatMap((tid) => readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(' ').filter(Boolean).map(Number)),
    [] as number[],
  );
  return children.reduce((s, c) => s + (treeCpuSeconds(c) ?? 0), own);
}

/** Machine-wide busy CPU time (user+nice+system+irq+softirq, seconds, all cores), from /proc/stat. */
export function machineCpuSeconds(): { busy: number } | undefined {
  const f = tryOr(() => readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number), undefined);
  return f && { busy: (f[0] + f[1] + f[2] + f[5] + f[6]) / hz() };
}

/** CPU seconds used so far by this process (user + system). */
export const selfCpuSeconds = () => ((u) => (u.user + u.system) / 1e6)(process.cpuUsage());

export interface ManagedProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** Last lines the process wrote to stderr. */
  tail(): string;
  /** Throws if the process has exited. */
  assertAlive(): void;
  /** SIGTERM, then SIGKILL after `graceMs`. Resolves with the exit code or signal. */
  stop(graceMs?: number): Promise<string>;
}

/**
 * A long-running child process, stopped when the benchmark ends however it ends. `cpus`: run on these CPUs only
 * (`taskset -c`, which execs the command in the same process, so pid and /proc figures stay the command's).
 */
export function spawnManaged(o: { name: string; command: string; args: string[]; env?: NodeJS.ProcessEnv; cwd?: string; cpus?: string }): ManagedProcess {
  const [command, args] = o.cpus ? ['taskset', ['-c', o.cpus, o.command, ...o.args]] : [o.command, o.args];
  // stdout (a service's access log) to /dev/null: the process still pays for writing it.
  const child = spawn(command, args, { cwd: o.cwd, env: o.env ?? process.env, stdio: ['ignore', 'ignore', 'pipe'] });
  if (!child.pid) throw new Error(`could not start ${o.name} (${o.command})`);
  const lines: string[] = [];
  const keep = (chunk: Buffer) => lines.push(...chunk.toString('utf8').split('\n').filter(Boolean)) > 60 && lines.splice(0, lines.length - 60);
  child.stderr?.on('data', keep);
  let exit: string | undefined;
  const exited = new Promise<string>((resolve) => child.once('exit', (code, signal) => resolve((exit = signal ? `signal ${signal}` : `code ${code}`))));
  const stop = async (graceMs = 10_000): Promise<string> => {
    if (exit) return exit;
    child.kill('SIGTERM');
    const timer = setTimeout(() => (console.error(`[bench] ${o.name} did not stop within ${graceMs} ms; SIGKILL`), child.kill('SIGKILL')), graceMs);
    return exited.finally(() => clearTimeout(timer));
  };
  const last = () => void (exit ?? child.kill('SIGKILL'));
  void exited.then(onCleanup(o.name, () => stop().then(() => undefined), last));
  return {
    name: o.name,
    child,
    pid: child.pid,
    tail: () => lines.join('\n'),
    assertAlive() {
      if (exit) throw new Error(`${o.name} exited (${exit}) — last output:\n${lines.join('\n')}`);
    },
    stop,
  };
}

export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request: on `agent` (default: none, no keep-alive), for probes, smoke checks and fixtures. */
export function httpRequest(
  url: string,
  o: { method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number; agent?: Agent } = {},
): Promise<HttpAnswer> {
  const timeout = o.timeoutMs ?? 5000;
  return new Promise((resolve, reject) => {
    const req = request(url, { method: o.method ?? 'GET', headers: o.headers, agent: o.agent ?? false, timeout }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`timeout after ${timeout} ms: ${o.method ?? 'GET'} ${url}`)));
    req.on('error', reject);
    req.end(o.body);
  });
}

/** Waits until `p` answers HTTP on `port`: 2xx on `readyUrl` when given, else any answer. */
export async function waitUntilServing(p: ManagedProcess, port: number, readyUrl?: string, timeoutMs = 30_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; ; await new Promise((r) => setTimeout(r, 100))) {
    p.assertAlive();
    const last = await httpRequest(readyUrl ?? `http://127.0.0.1:${port}/`, { timeoutMs: 1000 }).then(
      (r) => (!readyUrl || (r.status >= 200 && r.status < 300) ? undefined : `${r.status} ${r.body.slice(0, 200)}`),
      (err: Error) => err.message,
    );
    if (last === undefined) return;
    if (Date.now() > deadline) throw new Error(`${p.name} not serving after ${timeoutMs} ms (last: ${last})`);
  }
}

/**
 * CPU split for benchmarks: the server under test alone on the last CPU this process may use, everything else (this
 * process with the load generator, redis-server) on the others. Unpinned, the scheduler moves the server between
 * the CPUs it shares with them and its CPU per request swings by ±20%. Undefined with fewer than 2 CPUs or no taskset.
 */
export function cpuSplit(): { server: string; rest: string } | undefined {
  // "pid 123's current affinity list: 0-3,6"
  const out = tryOr(() => execFileSync('taskset', ['-p', '-c', String(process.pid)], { encoding: 'utf8' }), '');
  const allowed = (out.split(':')[1] ?? '')
    .trim()
    .split(',')
    .flatMap((part) => (([a, b]) => (b === undefined ? [a] : Array.from({ length: b - a + 1 }, (_, i) => a + i)))(part.split('-').map(Number)))
    .filter((n) => Number.isInteger(n));
  return allowed.length < 2 ? undefined : { server: String(allowed[allowed.length - 1]), rest: allowed.slice(0, -1).join(',') };
}

/** Pins every thread of `pid` (default: this process) to `cpuList`; children started later inherit it. */
export function pinProcess(cpuList: string, pid = process.pid): void {
  execFileSync('taskset', ['-a', '-p', '-c', cpuList, String(pid)], { stdio: 'ignore' });
}
