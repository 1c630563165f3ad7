import { copyFileSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fmtNum, markdownTable } from './report';

/** The `.cpuprofile` format written by `node --cpu-prof` (V8 Profile). */
interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  hitCount?: number;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** A named slice of the stack: a sample counts towards it when any frame of its (synchronous) stack matches. */
export interface Layer {
  name: string;
  match: (frame: CallFrame, where: string) => boolean;
}

export interface ProfileSummary {
  /** Sampled wall time inside the window, µs, and the part that was not idle. */
  windowUs: number;
  busyUs: number;
  byPackage: { name: string; us: number }[];
  topFunctions: { fn: string; where: string; us: number }[];
  layers: { name: string; us: number }[];
}

const SPECIAL = new Set(['(garbage collector)', '(program)', '(idle)', '(root)']);

/** `file:///work/main/node_modules/@nestjs/core/router/x.js` -> `node_modules/@nestjs/core/router/x.js` (relative to the first matching root). */
export function shortUrl(url: string, roots: string | string[]): string {
  let p = url;
  if (p.startsWith('file://')) {
    try {
      p = fileURLToPath(p);
    } catch {
      /* keep as is */
    }
  }
  for (const root of typeof roots === 'string' ? [roots] : roots) {
    if (p.startsWith(root + '/')) {
      p = p.slice(root.length + 1);
      break;
    }
  }
  const nm = p.lastIndexOf('node_modules/');
  if (nm > 0) p = p.slice(nm);
  return p;
}

/** Which package (or part of the app, or V8/Node) a frame's code belongs to. */
export function packageOf(frame: CallFrame, root: string | string[]): string {
  if (SPECIAL.has(frame.functionName) && !frame.url) return frame.functionName;
  if (!frame.url) return '(V8 builtins / native)';
  if (frame.url.startsWith('node:')) {
    const parts = frame.url.slice('node:'.length).split('/');
    return `node:${parts[0] === 'internal' && parts.length > 2 ? `${parts[0]}/${parts[1]}` : parts.join('/')}`;
  }
  const p = shortUrl(frame.url, root);
  const m = /^node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(p);
  if (m) return m[1];
  if (p.startsWith('dist/')) return `redis-pay ${p.split('/').slice(0, 2).join('/')}`;
  return p;
}

/**
 * Summarises a `.cpuprofile`: self time by package and by function, and the
 * synchronous inclusive time of a few named layers. Only samples inside
 * [fromUs, toUs] (V8 timestamps, CLOCK_MONOTONIC µs on Linux) count, so start-up
 * and shutdown are left out; without a window, all samples count.
 */
export function summariseProfile(path: string, root: string | string[], layers: Layer[], window?: { fromUs: number; toUs: number }, top = 25): ProfileSummary {
  const prof = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const n of prof.nodes) byId.set(n.id, n);
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

  // Sample i lasts until sample i+1 (as DevTools counts it).
  const n = prof.samples.length;
  const times: number[] = new Array<number>(n);
  let t = prof.startTime;
  for (let i = 0; i < n; i++) {
    t += prof.timeDeltas[i] ?? 0;
    times[i] = t;
  }
  const inWindow = (ts: number) => !window || (ts >= window.fromUs && ts <= window.toUs);
  const usable = window && times.some(inWindow) ? window : undefined;
  if (window && !usable) console.error('[bench] profile timestamps do not overlap the measured window; summarising the whole profile');

  const selfByNode = new Map<number, number>();
  let windowUs = 0;
  for (let i = 0; i < n; i++) {
    if (usable && !(times[i] >= usable.fromUs && times[i] <= usable.toUs)) continue;
    const dur = i + 1 < n ? times[i + 1] - times[i] : 0;
    windowUs += dur;
    selfByNode.set(prof.samples[i], (selfByNode.get(prof.samples[i]) ?? 0) + dur);
  }

  const pkg = new Map<string, number>();
  const fns = new Map<string, { fn: string; where: string; us: number }>();
  const layerUs = new Map<string, number>(layers.map((l) => [l.name, 0]));
  let idleUs = 0;
  for (const [id, us] of selfByNode) {
    const node = byId.get(id)!;
    const f = node.callFrame;
    if (f.functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    const p = packageOf(f, root);
    pkg.set(p, (pkg.get(p) ?? 0) + us);
    const where = f.url ? `${shortUrl(f.url, root)}:${f.lineNumber + 1}` : '';
    const key = `${f.functionName}@${where}`;
    const e = fns.get(key) ?? { fn: f.functionName || '(anonymous)', where, us: 0 };
    e.us += us;
    fns.set(key, e);

    // Layers: walk the stack once, count each matching layer once per sample.
    const hit = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const cf = byId.get(cur)!.callFrame;
      const w = cf.url ? shortUrl(cf.url, root) : '';
      for (const l of layers) if (!hit.has(l.name) && l.match(cf, w)) hit.add(l.name);
    }
    for (const name of hit) layerUs.set(name, layerUs.get(name)! + us);
  }

  return {
    windowUs,
    busyUs: windowUs - idleUs,
    byPackage: [...pkg].map(([name, us]) => ({ name, us })).sort((a, b) => b.us - a.us),
    topFunctions: [...fns.values()].sort((a, b) => b.us - a.us).slice(0, top),
    layers: [...layerUs].map(([name, us]) => ({ name, us })).sort((a, b) => b.us - a.us),
  };
}

/**
 * Summarises the `.cpuprofile` that `node --cpu-prof --cpu-prof-dir=<dir>` wrote, once per window
 * (e.g. one per load phase of the same server). With `keep`, copies the file to `keep.dir/keep.name`
 * (for Chrome DevTools). Undefined, with a message, when the process wrote none.
 */
export function summariseProfileDir(
  dir: string,
  roots: string | string[],
  layers: Layer[],
  windows: { fromUs: number; toUs: number }[],
  top: number,
  keep?: { dir: string; name: string },
): ProfileSummary[] | undefined {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  if (files.length === 0) {
    console.error(`[bench] no .cpuprofile written in ${dir}`);
    return undefined;
  }
  const file = join(dir, files[0]);
  if (keep) {
    mkdirSync(keep.dir, { recursive: true });
    copyFileSync(file, join(keep.dir, keep.name));
    console.error(`[bench] profile kept at ${join(keep.dir, keep.name)} (open in Chrome DevTools > Performance)`);
  }
  return windows.map((w) => summariseProfile(file, roots, layers, w, top));
}

/** Markdown for a summary; per-request figures when `requests` (completed in the window) is given. */
export function profileMarkdown(s: ProfileSummary, requests?: number, topPackages = 15): string {
  const pct = (us: number) => `${fmtNum((100 * us) / Math.max(1, s.busyUs), 1)}%`;
  const perReq = (us: number) => (requests ? fmtNum(us / requests, 1) : 'n/a');
  const out: string[] = [];
  out.push(
    `Sampled ${fmtNum(s.windowUs / 1e6, 1)} s of the server's main thread during the measured run; busy (not idle) ${fmtNum(s.busyUs / 1e6, 1)} s` +
      (requests ? ` for ${requests.toLocaleString('en-US')} requests = ${perReq(s.busyUs)} µs of main-thread CPU per request.` : '.'),
  );
  out.push('\n**Self time by package / area** (share of busy time):\n');
  out.push(
    markdownTable(
      ['Package / area', 'Self time', 'µs / request'],
      s.byPackage.slice(0, topPackages).map((p) => [p.name, pct(p.us), perReq(p.us)]),
      ['left', 'right', 'right'],
    ),
  );
  out.push(
    '\n**Layers** (synchronous inclusive time: samples whose stack contains the layer; work resumed after an `await` is counted where it resumes, so layers overlap and do not add up):\n',
  );
  out.push(
    markdownTable(
      ['Layer', 'Inclusive', 'µs / request'],
      s.layers.filter((l) => l.us > 0).map((l) => [l.name, pct(l.us), perReq(l.us)]),
      ['left', 'right', 'right'],
    ),
  );
  out.push('\n**Top functions by self time:**\n');
  out.push(
    markdownTable(
      ['#', 'Function', 'Where', 'Self time'],
      s.topFunctions.map((f, i) => [i + 1, `\`${f.fn}\``, f.where ? `\`${f.where}\`` : '(native)', pct(f.us)]),
      ['right', 'left', 'left', 'right'],
    ),
  );
  return out.join('\n');
}
