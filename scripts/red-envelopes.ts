/**
 * Ops CLI for red-envelope rains: `npm run -s red-envelopes -- create activity.json`.
 * Creates the activity (POST /admin/red-envelopes/activities) and shows a progress bar until it is READY.
 * The service is REDPAY_URL (default http://localhost:3000); the admin key is REDPAY_ADMIN_KEY, else the first
 * key of ADMIN_API_KEYS (from the environment or `.env`), else the development default.
 * Exit codes: 0 ready, 1 refused or failed, 2 usage (or a file it cannot read). While the service answers 503 (or 429, 502, 504) or cannot
 * be reached after the create, the progress is asked again every second, for up to a minute.
 */
import { existsSync, readFileSync } from 'node:fs';
import { DEV_DEFAULTS } from '../src/platform/config/load-config';

if (existsSync('.env')) process.loadEnvFile('.env');
const [command, file] = process.argv.slice(2);
if (command !== 'create' || !file) {
  console.error('usage: npm run -s red-envelopes -- create <activity.json>');
  process.exit(2);
}
const base = (process.env.REDPAY_URL ?? 'http://localhost:3000').replace(/\/$/, '');
const firstKey = (v: string | undefined) => v?.split(',')[0]?.split(':').slice(1).join(':');
const adminKey = process.env.REDPAY_ADMIN_KEY ?? firstKey(process.env.ADMIN_API_KEYS) ?? firstKey(DEV_DEFAULTS.ADMIN_API_KEYS)!;
const headers = { 'x-admin-key': adminKey, 'content-type': 'application/json' };

const bar = (done: number, total: number) => {
  const width = 30;
  const filled = total ? Math.round((done / total) * width) : width;
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done.toLocaleString('en')} / ${total.toLocaleString('en')}`;
};

/** While the service answers these (Redis briefly unreachable, a restart), the rain goes on loading: keep asking. */
const TRANSIENT = new Set([429, 502, 503, 504]);
/** The longest the progress is awaited through transient answers or an unreachable service before giving up. */
const MAX_OUTAGE_MS = 60_000;

/** A request to the service; an unreachable one says where and why instead of undici's bare "fetch failed". */
async function call(url: string, init: RequestInit): Promise<{ status: number; body: Record<string, unknown> }> {
  let res: Response;
  try {
    res = await fetch(url, init);
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new Error(`cannot reach ${base} (REDPAY_URL): ${cause?.code ?? cause?.message ?? (err as Error).message}`, { cause: err });
  }
  const text = await res.text();
  try {
    return { status: res.status, body: JSON.parse(text) as Record<string, unknown> };
  } catch {
    return { status: res.status, body: { message: `not a JSON answer: ${text.slice(0, 80)}` } };
  }
}

const why = (r: { status: number; body: Record<string, unknown> }) => `${r.status} ${String(r.body.error ?? '')} ${String(r.body.message ?? '')}`.trim();

/** The activity file; one that cannot be read is a usage error (exit 2), like a missing argument. */
function readActivity(): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    console.error(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    process.exit(2);
  }
}

async function main(): Promise<number> {
  const body = readActivity();
  const created = await call(`${base}/admin/red-envelopes/activities`, { method: 'POST', headers, body });
  if (created.status !== 202 && created.status !== 200) {
    console.error(`refused: ${why(created)}`);
    return 1;
  }
  const id = String(created.body.activityId);
  let outageSince: number | undefined;
  for (;;) {
    let res: { status: number; body: Record<string, unknown> } | undefined;
    try {
      res = await call(`${base}/admin/red-envelopes/activities/${encodeURIComponent(id)}`, { headers });
    } catch (err) {
      if (Date.now() - (outageSince ?? Date.now()) >= MAX_OUTAGE_MS) throw err;
    }
    if (!res || TRANSIENT.has(res.status)) {
      outageSince ??= Date.now();
      if (res && Date.now() - outageSince >= MAX_OUTAGE_MS) {
        process.stderr.write('\n');
        console.error(`gave up after ${MAX_OUTAGE_MS / 1000} s of ${why(res)}; the rain goes on loading: GET /admin/red-envelopes/activities/${id}`);
        return 1;
      }
      await new Promise((r) => setTimeout(r, 1000));
      continue;
    }
    outageSince = undefined;
    if (res.status === 404) {
      process.stderr.write('\n');
      console.error('the activity is gone (the sponsor could not fund it)');
      return 1;
    }
    if (res.status !== 200) {
      process.stderr.write('\n');
      console.error(`progress refused: ${why(res)}`);
      return 1;
    }
    const a = res.body as { state: string; progress: { loaded: number; total: number } };
    process.stderr.write(`\r${id} ${a.state.padEnd(8)} ${bar(a.progress.loaded, a.progress.total)}`);
    if (a.state !== 'FUNDING' && a.state !== 'LOADING') {
      process.stderr.write('\n');
      console.log(JSON.stringify(a));
      return 0;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    console.error(err.message);
    process.exit(1);
  },
);
