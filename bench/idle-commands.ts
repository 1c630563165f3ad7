/**
 * idle-commands: the Redis commands per second the service sends while nobody uses it (every background worker running,
 * plus --groups order-event consumer groups: bench/idle-commands-server.ts), for the build under test and, given
 * --baseline DIR, an earlier build. Each build runs alone against a fresh redis-server; after --warmup s it samples
 * INFO commandstats twice, --seconds apart, and reports the calls per second of every command but INFO.
 * Options: --dist DIR, --baseline DIR, --groups N (2), --seconds S (20), --warmup S (5), --quick (5 s, warm-up 2 s).
 * Runs with --baseline and the default window write bench/results/idle-commands.md; others write to $TMPDIR/redis-pay-bench/.
 */
import Redis from 'ioredis';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchWorkDir } from './lib/cleanup';
import { parseCommandStats } from './lib/command-stats';
import { fullEnv, ROOT, snapshotBuild, spawnBareServer } from './lib/full-stack';
import { freePort } from './lib/proc';
import { waitUntilServing } from './lib/proc';
import { startBenchRedis } from './lib/redis-server';
import { Align, type BuildInfo, buildInfo, environmentInfo, fmtNum, GoalLine, markdownTable, reportHead, RESULTS_DIR, writeResult } from './lib/report';
import { setTimeout as sleep } from 'node:timers/promises';

const NAME = 'idle-commands';

type Options = ReturnType<typeof parseArgs>;

/** One build's idle figures: calls per second by command (INFO left out), connections and blocked clients at the end. */
interface Measured {
  label: string;
  build: BuildInfo;
  perSecond: number;
  byCommand: [command: string, perSecond: number][];
  connections: number;
  blockedClients: number;
  redisVersion: string;
}

function parseArgs(args: string[]) {
  const o = { dist: join(ROOT, 'dist'), baseline: undefined as string | undefined, groups: 2, seconds: 20, warmup: 5, quick: false };
  for (let i = 0; i < args.length; i++) {
    const [a, v] = [args[i], args[i + 1]];
    if (a === '--quick') Object.assign(o, { quick: true, seconds: 5, warmup: 2 });
    else if (a === '--dist' || a === '--baseline') o[a === '--dist' ? 'dist' : 'baseline'] = resolve(v ?? '');
    else if (a === '--groups' || a === '--seconds' || a === '--warmup') o[a.slice(2) as 'groups'] = Number(v);
    else throw new Error(`unknown option ${a}`);
    if (a !== '--quick') i++;
  }
  if (![o.groups, o.seconds, o.warmup].every((n) => Number.isFinite(n) && n >= 0)) throw new Error('--groups, --seconds and --warmup take numbers >= 0');
  return o;
}

/** `INFO commandstats` as calls by command name. */
const commandCalls = (info: string) => new Map([...parseCommandStats(info)].map(([name, s]) => [name, s.calls]));

async function measure(label: string, distDir: string, o: Options): Promise<Measured> {
  const work = benchWorkDir(`rp-idle-${label}-`);
  const dist = snapshotBuild(distDir, join(work, 'build'));
  const redis = await startBenchRedis();
  const port = await freePort();
  const server = spawnBareServer({
    id: `idle ${label}`,
    port,
    script: join(ROOT, 'bench', 'idle-commands-server.ts'),
    env: { ...fullEnv(port, redis.url, 'idle', { LOG_LEVEL: 'warn' }), DIST: dist, GROUPS: String(o.groups) },
  });
  const probe = new Redis(redis.url, { connectionName: 'idle-bench-probe', maxRetriesPerRequest: 1 });
  try {
    await waitUntilServing(server, port, `http://127.0.0.1:${port}/health/ready`, 60_000);
    await sleep(o.warmup * 1000);
    const before = commandCalls(String(await probe.info('commandstats')));
    const t0 = performance.now();
    await sleep(o.seconds * 1000);
    const after = commandCalls(String(await probe.info('commandstats')));
    const elapsedS = (performance.now() - t0) / 1000;
    server.assertAlive();
    const byCommand = [...after]
      .filter(([cmd]) => cmd !== 'info')
      .map(([cmd, n]): [string, number] => [cmd, (n - (before.get(cmd) ?? 0)) / elapsedS])
      .filter(([, n]) => n > 0)
      .sort((a, b) => b[1] - a[1]);
    const clients = String(await probe.client('LIST'))
      .split('\n')
      .filter((l) => l.trim() && !l.includes('name=idle-bench-probe'));
    const blocked = /^blocked_clients:(\d+)/m.exec(String(await probe.info('clients')))?.[1];
    return {
      label,
      build: buildInfo(distDir),
      perSecond: byCommand.reduce((s, [, n]) => s + n, 0),
      byCommand,
      connections: clients.length,
      blockedClients: Number(blocked ?? 0),
      redisVersion: redis.version,
    };
  } finally {
    probe.disconnect();
    await server.stop(15_000);
    await redis.stop();
  }
}

export async function main(args: string[]): Promise<void> {
  const o = parseArgs(args);
  const rows: Measured[] = [];
  if (o.baseline) rows.push(await measure('baseline', o.baseline, o));
  rows.push(await measure('candidate', o.dist, o));
  const [base, cand] = o.baseline ? [rows[0], rows[1]] : [undefined, rows[0]];

  const goals: GoalLine[] = [
    {
      goal: `idle Redis commands/s, all workers running, ${o.groups} order-event consumer groups`,
      target: 'lower than before',
      measured: base ? `${fmtNum(cand.perSecond, 1)} vs ${fmtNum(base.perSecond, 1)} before` : `${fmtNum(cand.perSecond, 1)} (no baseline measured)`,
      met: base ? cand.perSecond < base.perSecond : undefined,
    },
  ];
  const env = environmentInfo(cand.redisVersion, { groups: o.groups, windowS: o.seconds, warmupS: o.warmup });
  const commands = [...new Set(rows.flatMap((r) => r.byCommand.map(([c]) => c)))];
  const rate = (r: Measured, c: string) => r.byCommand.find(([x]) => x === c)?.[1] ?? 0;
  commands.sort((a, b) => Math.max(...rows.map((r) => rate(r, b))) - Math.max(...rows.map((r) => rate(r, a))));
  const right: Align[] = ['left', ...rows.map((): Align => 'right')];
  const buildName = (r: Measured) => `${r.label}${r.build.commit ? ` (${r.build.commit.slice(0, 7)}${r.build.dirty ? ', dirty' : ''})` : ''}`;
  const md = [
    ...reportHead(NAME, args, env, goals),
    '## Idle commands per second, in all and by command (calls/s)',
    '',
    markdownTable(
      ['', ...rows.map(buildName)],
      [
        ['**all commands/s**', ...rows.map((r) => `**${fmtNum(r.perSecond, 1)}**`)],
        ['connections', ...rows.map((r) => r.connections)],
        ['blocked clients', ...rows.map((r) => r.blockedClients)],
        ...commands.map((c) => [c, ...rows.map((r) => fmtNum(rate(r, c), 2))]),
      ],
      right,
    ),
    '',
    `Each build alone against a fresh redis-server, ${o.groups} order-event consumer group(s), no HTTP traffic after the readiness check; INFO commandstats read ${o.warmup} s after start and again ${o.seconds} s later on a connection of its own (INFO left out); connections and blocked clients at the end of the window.`,
    '',
  ].join('\n');
  const standard = o.baseline !== undefined && !o.quick && o.seconds === 20;
  const dir = standard ? RESULTS_DIR : join(tmpdir(), 'redis-pay-bench');
  writeResult(NAME, md, dir);
}
