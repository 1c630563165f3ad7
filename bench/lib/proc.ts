import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { onCleanup } from './cleanup';
import { waitForHttpOk, waitForPort } from './net';

let clockTicks: number | undefined;

/** Kernel clock ticks per second (USER_HZ), for /proc/<pid>/stat. */
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** CPU time (user + system, seconds) used so far by one process, or undefined where /proc is missing. */
export function cpuSeconds(pid: number | undefined): number | undefined {
  if (!pid) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may contain spaces.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(rest[11]);
    const stime = Number(rest[12]);
    return (utime + stime) / ticksPerSecond();
  } catch {
    return undefined;
  }
}

/** CPU seconds used so far by `pid` and every process below it (children found through /proc/<pid>/task/<tid>/children). */
export function treeCpuSeconds(pid: number): number | undefined {
  const own = cpuSeconds(pid);
  if (own === undefined) return undefined;
  let children: number[] = [];
  try {
    children = readdirSync(`/proc/${pid}/task`).flatMap((tid) =>
      readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(' ').filter(Boolean).map(Number),
    );
  } catch {
    /* gone, or no children file: the process alone */
  }
  return children.reduce((s, c) => s + (treeCpuSeconds(c) ?? 0), own);
}

export interface ManagedProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** Last lines the process wrote to stderr (and stdout, when captured). */
  tail(): string;
  exited(): boolean;
  /** Throws if the process has exited. */
  assertAlive(): void;
  /** SIGTERM, then SIGKILL after `graceMs`. Resolves with the exit code or signal. */
  stop(graceMs?: number): Promise<string>;
}

export interface SpawnOptions {
  name: string;
  command: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** 'ignore' sends stdout to /dev/null (the process still pays for writing it); 'capture' keeps a tail. */
  stdout?: 'ignore' | 'capture' | 'inherit';
  /** Run on these CPUs only (`taskset -c`, a cpu-list such as `1` or `2-3`); the pid stays the command's. */
  cpus?: string;
}

/** Spawns a long-running child process that is stopped when the benchmark ends, however it ends. */
export function spawnManaged(opts: SpawnOptions): ManagedProcess {
  // taskset sets the affinity and execs the command in the same process, so pid and /proc figures stay the command's.
  const [command, args] = opts.cpus ? ['taskset', ['-c', opts.cpus, opts.command, ...opts.args]] : [opts.command, opts.args];
  const child = spawn(command, args, {
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    stdio: ['ignore', opts.stdout === 'capture' ? 'pipe' : (opts.stdout ?? 'ignore'), 'pipe'],
  });
  if (!child.pid) throw new Error(`could not start ${opts.name} (${opts.command})`);
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    if (lines.length > 60) lines.splice(0, lines.length - 60);
  };
  child.stderr?.on('data', keep);
  child.stdout?.on('data', keep);
  let exitInfo: string | undefined;
  const exitedP = new Promise<string>((resolve) =>
    child.once('exit', (code, signal) => {
      exitInfo = signal ? `signal ${signal}` : `code ${code}`;
      resolve(exitInfo);
    }),
  );
  const exited = () => exitInfo !== undefined;

  const stop = async (graceMs = 10_000): Promise<string> => {
    if (exited()) return exitInfo!;
    child.kill('SIGTERM');
    const timer = setTimeout(() => {
      if (!exited()) {
        console.error(`[bench] ${opts.name} did not stop within ${graceMs} ms; SIGKILL`);
        child.kill('SIGKILL');
      }
    }, graceMs);
    const info = await exitedP;
    clearTimeout(timer);
    return info;
  };
  const unregister = onCleanup(
    opts.name,
    async () => {
      await stop();
    },
    () => {
      if (!exited()) child.kill('SIGKILL');
    },
  );
  void exitedP.then(() => unregister());

  return {
    name: opts.name,
    child,
    pid: child.pid,
    tail: () => lines.join('\n'),
    exited,
    assertAlive() {
      if (exited()) throw new Error(`${opts.name} exited (${exitInfo}) — last output:\n${lines.join('\n')}`);
    },
    stop,
  };
}

/** Waits until the process listens on `port` and, with `readyUrl`, answers 2xx there. */
export async function waitUntilServing(p: ManagedProcess, port: number, readyUrl?: string, timeoutMs = 30_000): Promise<void> {
  const started = Date.now();
  await waitForPort(port, timeoutMs, () => p.assertAlive());
  if (readyUrl) await waitForHttpOk(readyUrl, Math.max(1000, timeoutMs - (Date.now() - started)), () => p.assertAlive());
}

/** Machine-wide busy CPU time (user+nice+system+irq+softirq, seconds, all cores), from /proc/stat. */
export function machineCpuSeconds(): { busy: number } | undefined {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const [user, nice, system, , , irq, softirq] = f;
    return { busy: (user + nice + system + irq + softirq) / ticksPerSecond() };
  } catch {
    return undefined;
  }
}

/** CPU seconds used so far by this process (user + system). */
export const selfCpuSeconds = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

/**
 * CPU split for benchmarks: the server under test alone on the last CPU this process may use,
 * everything else (this process with the load generator, redis-server, other children) on the
 * others. Unpinned, the scheduler keeps moving the server between the CPUs it shares with the
 * load generator and redis, and its CPU per request swings by ±20% from one window to the next.
 * Undefined when fewer than 2 CPUs are allowed or there is no `taskset`.
 */
export function cpuSplit(): { server: string; rest: string } | undefined {
  let allowed: number[];
  try {
    // "pid 123's current affinity list: 0-3,6"
    const out = execFileSync('taskset', ['-p', '-c', String(process.pid)], { encoding: 'utf8' });
    allowed = (out.split(':').pop() ?? '')
      .trim()
      .split(',')
      .flatMap((part) => {
        const [a, b] = part.split('-').map(Number);
        return b === undefined ? [a] : Array.from({ length: b - a + 1 }, (_, i) => a + i);
      })
      .filter((n) => Number.isInteger(n));
  } catch {
    return undefined;
  }
  if (allowed.length < 2) return undefined;
  return { server: String(allowed[allowed.length - 1]), rest: allowed.slice(0, -1).join(',') };
}

/** Pins every thread of `pid` (default: this process) to `cpuList`; children started later inherit it. */
export function pinProcess(cpuList: string, pid = process.pid): void {
  execFileSync('taskset', ['-a', '-p', '-c', cpuList, String(pid)], { stdio: 'ignore' });
}
