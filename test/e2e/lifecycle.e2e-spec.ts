import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { AddressInfo, connect, createServer, Socket } from 'node:net';
import Redis from 'ioredis';
import { BackgroundWorkers } from '../../src/engines/workers/background-workers.service';
import { RedisService } from '../../src/platform/redis/redis.service';
import { freePort } from '../harness/free-port';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { CREDS, startTestApp, userToken } from '../support/test-app';
import { sign } from 'jsonwebtoken';
import { DEV_DEFAULTS } from '../../src/platform/config/load-config';

const devToken = (sub: string) => sign({ sub }, DEV_DEFAULTS.JWT_SECRET, { algorithm: 'HS256', expiresIn: 600 });

const ROOT = resolve(__dirname, '../..');
const MAIN = resolve(ROOT, 'dist/main.js');
/** `npm start`'s launcher: the built service, with a managed redis-server when no Redis is configured (development). */
const LAUNCHER = resolve(ROOT, 'scripts/dev/start.ts');

const portOpen = (port: number) =>
  new Promise<boolean>((r) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => (s.end(), r(true)));
    s.once('error', () => (s.destroy(), r(false)));
  });

async function until<T>(fn: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Starts `npm start`'s launcher in development with no Redis configured (so it manages a redis-server on
 * `managedPort`) and waits at most 20 s for it to give up: its exit code, what it printed, and whether a managed
 * redis-server wrote its pid file.
 */
async function startExpectingRefusal(httpPort: number, managedPort: number): Promise<{ code: number | null; out: string; pidFile: boolean }> {
  const dir = mkdtempSync(join(tmpdir(), 'rp-managed-'));
  const p = runLauncher({
    NODE_ENV: 'development',
    PORT: String(httpPort),
    HOST: '127.0.0.1',
    REDIS_MANAGED_PORT: String(managedPort),
    REDIS_MANAGED_DIR: dir,
    LOG_LEVEL: 'info',
  });
  try {
    const code = await exitWithin(p, 20_000);
    return { code, out: p.output(), pidFile: existsSync(join(dir, 'redis.pid')) };
  } finally {
    p.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The exit code of `p`, or a failure (with what it printed) if it is still running after `ms`. */
async function exitWithin(p: Started, ms: number): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'running'>((r) => (timer = setTimeout(() => r('running'), ms)));
  const code = await Promise.race([p.exit, late]).finally(() => clearTimeout(timer));
  if (code === 'running') {
    p.child.kill('SIGKILL');
    throw new Error(`still running after ${ms} ms; it printed:\n${p.output()}`);
  }
  return code;
}

/** A TCP listener on a free loopback port that accepts connections and never answers (not Redis). */
async function silentListener(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const srv = createServer((s) => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return {
    port: (srv.address() as AddressInfo).port,
    close: () => {
      sockets.forEach((s) => s.destroy());
      return new Promise<void>((r) => srv.close(() => r()));
    },
  };
}

interface Started {
  child: ChildProcess;
  output: () => string;
  exit: Promise<number | null>;
}

/** The built service alone, as `npm run start:prod` and the image run it. */
const runMain = (env: Record<string, string>) => run([MAIN], env);
/** `npm start`: the launcher, which runs the built service in its own process. */
const runLauncher = (env: Record<string, string>) => run(['--import', 'tsx', LAUNCHER], env);

function run(args: string[], env: Record<string, string>): Started {
  let out = '';
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, output: () => out, exit };
}

describe('Lifecycle', () => {
  describe('graceful shutdown (in process)', () => {
    let redis: RedisServerHandle;
    beforeAll(async () => {
      redis = await startRedisServer();
    });
    afterAll(() => redis.destroy());

    it('finishes an in-flight request, stops accepting, stops workers before closing Redis', async () => {
      const t = await startTestApp(redis.url, { REDIS_COMMAND_TIMEOUT_MS: '3000' });
      const events: string[] = [];
      const redisService = t.app.get(RedisService);
      const admin = new Redis(redis.url);
      let closing: Promise<unknown> | undefined;
      try {
        const visitKey = `${t.config.redis.keyPrefix}:diagnostics:{a:acc_sd}:visits:drain`;
        t.app.get(BackgroundWorkers).register('probe', {
          stop: async () => {
            // Server side, the in-flight request must be done by now, and Redis still open for the worker.
            events.push(`worker stopped after visit ${await admin.hget(visitKey, 'n')}, redis ${redisService.client.status}`);
          },
        });
        const port = (t.app.getHttpServer().address() as { port: number }).port;
        // Hold Redis for 1.5 s so the request below is in flight when shutdown starts.
        await admin.call('CLIENT', 'PAUSE', '1500', 'WRITE');
        // Shutdown starts once the server has the request (a fixed delay lets a slow machine close first: a 503).
        const received = new Promise<void>((r) => t.app.getHttpServer().once('request', () => r()));
        const inFlight = fetch(`http://127.0.0.1:${port}/diagnostics/touch`, {
          method: 'POST',
          headers: { authorization: `Bearer ${userToken('acc_sd')}`, 'content-type': 'application/json' },
          body: JSON.stringify({ label: 'drain' }),
        });
        await received;
        await new Promise((r) => setTimeout(r, 50));
        closing = t.app.close().then(() => events.push(`closed, redis ${redisService.client.status}`));
        await new Promise((r) => setTimeout(r, 100));
        expect(await portOpen(port)).toBe(false); // no longer accepting
        const res = await inFlight;
        expect(res.status).toBe(200);
        expect(res.headers.get('connection')).toBe('close');
        expect(((await res.json()) as { count: number }).count).toBe(1);
        await closing;
        expect(events).toEqual(['worker stopped after visit 1, redis ready', 'closed, redis end']);
      } finally {
        // A failed expectation must not leave the app or a reconnecting client behind (the run would never exit).
        await (closing ?? t.app.close()).catch(() => undefined);
        admin.disconnect();
      }
    });
  });

  describe('the real process (dist/main.js)', () => {
    beforeAll(() => {
      if (!existsSync(MAIN)) throw new Error('dist/main.js is missing: run `npm run build` first (npm test does)');
    });

    it('npm start in development with no Redis configured supervises a local redis-server (AOF, noeviction) and stops it on SIGTERM', async () => {
      const [port, redisPort] = [await freePort(), await freePort()];
      const dir = mkdtempSync(join(tmpdir(), 'rp-managed-'));
      const p = runLauncher({
        NODE_ENV: 'development',
        PORT: String(port),
        HOST: '127.0.0.1',
        REDIS_MANAGED_PORT: String(redisPort),
        REDIS_MANAGED_DIR: dir,
        LOG_LEVEL: 'info',
      });
      const r = new Redis(redisPort, { lazyConnect: true });
      try {
        await until(async () => ((await fetch(`http://127.0.0.1:${port}/health/ready`)).status === 200 ? true : undefined), 30_000);
        expect(p.output()).toContain('[managed-redis]');
        // Structured JSON logs carry the request id; credentials are redacted.
        const token = 'Bearer secret-looking-token-value';
        await fetch(`http://127.0.0.1:${port}/diagnostics/whoami`, { headers: { 'x-request-id': 'life-123', authorization: token } });
        const line = await until(async () => {
          const found = p
            .output()
            .split('\n')
            .find((l) => l.startsWith('{') && l.includes('life-123'));
          return found ? (JSON.parse(found) as Record<string, unknown>) : undefined;
        }, 5000);
        expect(line.requestId).toBe('life-123');
        expect(line).toMatchObject({ statusCode: 401, method: 'GET', route: '/diagnostics/whoami', service: 'redis-pay' });
        expect(p.output()).not.toContain('secret-looking-token-value');
        expect(await r.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
        expect(await r.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
        expect(await r.config('GET', 'dir')).toEqual(['dir', dir]);
        r.disconnect();
        const pid = Number(readFileSync(join(dir, 'redis.pid'), 'utf8'));
        p.child.kill('SIGTERM');
        expect(await p.exit).toBe(0);
        expect(await portOpen(redisPort)).toBe(false);
        expect(existsSync(`/proc/${pid}`)).toBe(false);
      } finally {
        r.disconnect();
        p.child.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('after a kill -9 of npm start, a restart takes over the orphaned redis-server and its data survives', async () => {
      const [port, redisPort] = [await freePort(), await freePort()];
      const dir = mkdtempSync(join(tmpdir(), 'rp-managed-'));
      const env = {
        NODE_ENV: 'development',
        PORT: String(port),
        HOST: '127.0.0.1',
        REDIS_MANAGED_PORT: String(redisPort),
        REDIS_MANAGED_DIR: dir,
        LOG_LEVEL: 'warn',
      };
      const ready = () => until(async () => ((await fetch(`http://127.0.0.1:${port}/health/ready`)).status === 200 ? true : undefined), 30_000);
      const touch = async () =>
        (await (
          await fetch(`http://127.0.0.1:${port}/diagnostics/touch`, {
            method: 'POST',
            headers: { authorization: `Bearer ${devToken('acc_k9')}`, 'content-type': 'application/json' },
            body: JSON.stringify({ label: 'k9' }),
          })
        ).json()) as { count: number };
      const first = runLauncher(env);
      let second: Started | undefined;
      try {
        await ready();
        expect((await touch()).count).toBe(1);
        const orphan = Number(readFileSync(join(dir, 'redis.pid'), 'utf8'));
        first.child.kill('SIGKILL');
        await first.exit;
        expect(existsSync(`/proc/${orphan}`)).toBe(true); // the child redis-server outlived its parent
        second = runLauncher(env);
        await ready();
        expect(second.output()).toContain(`stopping leftover redis-server (pid ${orphan})`);
        expect((await touch()).count).toBe(2); // the AOF kept the first visit
        second.child.kill('SIGTERM');
        expect(await second.exit).toBe(0);
        expect(await portOpen(redisPort)).toBe(false);
      } finally {
        first.child.kill('SIGKILL');
        second?.child.kill('SIGKILL');
        spawnSync('pkill', ['-f', `redis-server 127.0.0.1:${redisPort}`]);
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('with no Redis configured and REDIS_MANAGED_PORT held by another Redis, stops promptly naming REDIS_MANAGED_PORT and writes nothing to that Redis', async () => {
      const foreign = await startRedisServer();
      const r = new Redis(foreign.port, { lazyConnect: true });
      try {
        const httpPort = await freePort();
        const { code, out, pidFile } = await startExpectingRefusal(httpPort, foreign.port);
        expect(code).toBe(1);
        expect(out).toContain(`127.0.0.1:${foreign.port} is already in use by another Redis`);
        expect(out).toMatch(/Choose a free port for the development Redis with REDIS_MANAGED_PORT \(for example REDIS_MANAGED_PORT=\d+ npm start\)/);
        expect(out).not.toContain('AOF on, noeviction'); // no claim that the foreign Redis is ours
        expect(out).not.toContain('listening on');
        expect(pidFile).toBe(false);
        expect(await portOpen(httpPort)).toBe(false);
        // The foreign Redis is untouched: still up, and not one key written.
        expect(await r.ping()).toBe('PONG');
        expect(await r.dbsize()).toBe(0);
      } finally {
        r.disconnect();
        await foreign.destroy();
      }
    });

    it('with REDIS_MANAGED_PORT held by a program that is not Redis, stops promptly naming REDIS_MANAGED_PORT instead of retrying forever', async () => {
      const holder = await silentListener();
      try {
        const { code, out } = await startExpectingRefusal(await freePort(), holder.port);
        expect(code).toBe(1);
        expect(out).toContain(`127.0.0.1:${holder.port} is already in use by a program that is not Redis`);
        expect(out).toContain('REDIS_MANAGED_PORT');
        expect(out).not.toContain('AOF on, noeviction');
        expect(out).not.toContain('listening on');
      } finally {
        await holder.close();
      }
    });

    it('with the HTTP port in use, stops with a hint about PORT, no "successfully started" line, and no redis-server left running', async () => {
      const holder = await silentListener();
      try {
        const redisPort = await freePort();
        const { code, out } = await startExpectingRefusal(holder.port, redisPort);
        expect(code).toBe(1);
        expect(out).toContain(`Cannot listen on 127.0.0.1:${holder.port}: the port is already in use`);
        expect(out).toMatch(/Choose another port with PORT, for example PORT=\d+ npm start/);
        expect(out).not.toContain('successfully started');
        expect(out).not.toContain('listening on');
        // The managed Redis is not left behind (it is not even started: the HTTP port is taken first).
        expect(await portOpen(redisPort)).toBe(false);
        expect(
          spawnSync('pgrep', ['-f', `redis-server 127.0.0.1:${redisPort}`])
            .stdout.toString()
            .trim(),
        ).toBe('');
      } finally {
        await holder.close();
      }
    });

    it('SIGTERM with connections that have sent no request (or half a request) open: the request in flight is answered, they are closed, exit 0 well before the grace', async () => {
      const redis = await startRedisServer();
      const port = await freePort();
      const p = runMain({
        NODE_ENV: 'production',
        PORT: String(port),
        HOST: '127.0.0.1',
        LOG_LEVEL: 'warn',
        REDIS_URL: redis.url,
        REDIS_COMMAND_TIMEOUT_MS: '3000',
        SHUTDOWN_GRACE_MS: '20000',
        JWT_SECRET: CREDS.jwtSecret,
        MERCHANT_SECRETS: `${CREDS.merchantId}:${CREDS.merchantSecret}`,
        ADMIN_API_KEYS: `${CREDS.adminName}:${CREDS.adminKey}`,
        SERVICE_TOKENS: `${CREDS.serviceName}:${CREDS.serviceToken}`,
      });
      const admin = new Redis(redis.url);
      const opened: Socket[] = [];
      try {
        await until(async () => ((await fetch(`http://127.0.0.1:${port}/health/ready`)).status === 200 ? true : undefined), 30_000);
        // A connection a client or a load balancer opened ahead of a request, and one whose request headers never end.
        const open = async (send?: string) => {
          const s = connect(port, '127.0.0.1');
          s.on('error', () => undefined);
          await new Promise((r) => s.once('connect', r));
          if (send) s.write(send);
          opened.push(s);
          return { closed: new Promise<void>((r) => s.once('close', () => r())) };
        };
        const closed = [(await open()).closed, (await open('POST /diagnostics/touch HTTP/1.1\r\nHost: x\r\n')).closed];
        // A request held in flight by Redis (writes paused for 1.5 s) when the signal comes.
        await admin.call('CLIENT', 'PAUSE', '1500', 'WRITE');
        const inFlight = fetch(`http://127.0.0.1:${port}/diagnostics/touch`, {
          method: 'POST',
          headers: { authorization: `Bearer ${userToken('acc_sig')}`, 'content-type': 'application/json' },
          body: JSON.stringify({ label: 'drain' }),
          signal: AbortSignal.timeout(15_000),
        });
        await new Promise((r) => setTimeout(r, 300));
        p.child.kill('SIGTERM');
        const res = await inFlight;
        expect(res.status).toBe(200);
        expect(res.headers.get('connection')).toBe('close');
        await Promise.all(closed);
        // Before, the connection with no request held the shutdown until SHUTDOWN_GRACE_MS: exit 1, workers never stopped.
        expect(await exitWithin(p, 15_000)).toBe(0);
        expect(p.output()).not.toContain('shutdown took longer');
      } finally {
        opened.forEach((s) => s.destroy());
        admin.disconnect();
        p.child.kill('SIGKILL');
        await redis.destroy();
      }
    }, 60_000);

    it('in production refuses to start without Redis settings, naming the variable', async () => {
      const p = runMain({ NODE_ENV: 'production', JWT_SECRET: 'x'.repeat(40) });
      expect(await p.exit).toBe(78);
      expect(p.output()).toMatch(/Configuration error: REDIS_URL is required in production/);
    });

    it('stops with a message naming a bad setting', async () => {
      const p = runMain({ NODE_ENV: 'development', PORT: 'eighty' });
      expect(await p.exit).toBe(78);
      expect(p.output()).toMatch(/Configuration error: PORT /);
    });

    it("stops with a message naming a bad module setting (a module's own config slice), before npm start starts a Redis", async () => {
      const p = runLauncher({ NODE_ENV: 'development', ORDERS_QUERY_DELAY_MS: '-5' });
      expect(await p.exit).toBe(78);
      expect(p.output()).toMatch(/Configuration error: ORDERS_QUERY_DELAY_MS must not be less than 10/);
      expect(p.output()).not.toContain('[managed-redis]');
    });

    it('npm start never spawns redis-server in production', async () => {
      // Look for a redis-server on this run's own managed port, not a machine-wide count that other suites change.
      const port = await freePort();
      const spawned = () =>
        spawnSync('pgrep', ['-f', `redis-server .*:${port}`])
          .stdout.toString()
          .trim();
      const p = runLauncher({ NODE_ENV: 'production', JWT_SECRET: 'y'.repeat(40), REDIS_MANAGED_PORT: String(port) });
      expect(await p.exit).toBe(78);
      expect(p.output()).toMatch(/Configuration error: REDIS_URL is required in production/);
      expect(p.output()).not.toContain('[managed-redis]');
      expect(spawned()).toBe('');
    });

    it.each<[string, Record<string, string>]>([
      ['NODE_ENV=development', { NODE_ENV: 'development' }],
      ['NODE_ENV unset', {}],
    ])(
      'the built service alone (%s) with no Redis configured stops at once naming REDIS_URL, REDIS_SENTINELS and REDIS_CLUSTER_NODES, and starts no redis-server',
      async (_, nodeEnv) => {
        const [port, redisPort] = [await freePort(), await freePort()];
        const dir = mkdtempSync(join(tmpdir(), 'rp-managed-'));
        const p = runMain({ ...nodeEnv, PORT: String(port), HOST: '127.0.0.1', REDIS_MANAGED_PORT: String(redisPort), REDIS_MANAGED_DIR: dir });
        try {
          expect(await exitWithin(p, 10_000)).toBe(78);
          expect(p.output()).toMatch(
            /Configuration error: REDIS_URL is required \(or REDIS_SENTINELS \+ REDIS_SENTINEL_MASTER, or REDIS_CLUSTER_NODES\): the service never starts a Redis of its own; `npm start` starts a local redis-server for development/,
          );
          expect(p.output()).not.toContain('[managed-redis]');
          expect(p.output()).not.toContain('listening on');
          expect(existsSync(join(dir, 'redis.pid'))).toBe(false);
          expect(await portOpen(redisPort)).toBe(false);
          expect(
            spawnSync('pgrep', ['-f', `redis-server .*:${redisPort}`])
              .stdout.toString()
              .trim(),
          ).toBe('');
        } finally {
          p.child.kill('SIGKILL');
          rmSync(dir, { recursive: true, force: true });
        }
      },
    );
  });
});
