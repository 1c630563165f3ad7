/**
 * Ops CLI for red-envelope rains: `npm run -s red-envelopes -- create activity.json`.
 * Creates the activity (POST /admin/red-envelopes/activities) and shows a progress bar until it is READY.
 * The service is REDPAY_URL (default http://localhost:3000); the admin key is REDPAY_ADMIN_KEY, else the first
 * key of ADMIN_API_KEYS (from the environment or `.env`), else the development default.
 * Exit codes: 0 ready, 1 refused or failed, 2 usage.
 */
import { existsSync, readFileSync } from 'node:fs';
import { DEV_DEFAULTS } from '../src/config/load-config';

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

async function main(): Promise<number> {
  const body = readFileSync(file, 'utf8');
  const created = await fetch(`${base}/admin/red-envelopes/activities`, { method: 'POST', headers, body });
  const first = (await created.json()) as { activityId?: string; message?: string; error?: string };
  if (created.status !== 202 && created.status !== 200) {
    console.error(`refused: ${created.status} ${first.error ?? ''} ${first.message ?? ''}`);
    return 1;
  }
  const id = first.activityId!;
  for (;;) {
    const res = await fetch(`${base}/admin/red-envelopes/activities/${encodeURIComponent(id)}`, { headers });
    if (res.status === 404) {
      process.stderr.write('\n');
      console.error('the activity is gone (the sponsor could not fund it)');
      return 1;
    }
    const a = (await res.json()) as { state: string; progress: { loaded: number; total: number } };
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
