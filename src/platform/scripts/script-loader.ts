import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import type { DurabilityClass } from '../config/app-config';

/** Where the Lua files live: `<project>/lua`, the same from `src/` (ts-jest, tsx) and from `dist/`. */
export const DEFAULT_LUA_DIR = resolve(__dirname, '..', '..', '..', 'lua');

/** The parsed contract block at the top of a script. */
export interface ScriptContract {
  purpose: string;
  keys: string[];
  argv: string[];
  returns: string;
  /** `Durable: money | messages`: the write is acknowledged only once the configured replicas have it. */
  durable?: DurabilityClass;
}

/** One loaded script, ready for SCRIPT LOAD / EVALSHA. */
export interface ScriptDefinition {
  /** `<module>/<name>`, e.g. `core/rate-limit`. */
  id: string;
  file: string;
  numberOfKeys: number;
  /** Source with includes inlined. */
  source: string;
  sha: string;
  contract: ScriptContract;
}

export class ScriptContractError extends Error {
  constructor(file: string, problem: string) {
    super(`${file}: ${problem}`);
    this.name = 'ScriptContractError';
  }
}

/** The layers of lua/, as of src/: a script sits beside the module it serves, `lua/<layer>/<module>/`. */
const LAYERS = ['platform', 'engines', 'features'];

const FILE_RE = /^([a-z][a-z0-9-]*)-(\d+)\.lua$/;
const INCLUDE_RE = /^--- @include "([a-z0-9/_-]+)"\s*$/gm;

/**
 * Parses the leading `--[[ ... ]]` block. Its layout:
 *
 *   --[[
 *     One or more lines saying what the script does.
 *
 *     KEYS[1]  what the first key is
 *     ARGV[1]  what the first argument is      (or: `ARGV  none`)
 *
 *     Returns: what comes back, every code
 *
 *     Durable: money                            (optional: a write that moves money, or `messages`)
 *   ]]
 */
export function parseContract(file: string, text: string, numberOfKeys: number): ScriptContract {
  const m = /^--\[\[\n([\s\S]*?)\n\]\]/.exec(text);
  if (!m) throw new ScriptContractError(file, 'must open with a --[[ ... ]] contract block');
  const all = m[1].split('\n').map((l) => l.trim());
  const durableLines = all.filter((l) => l.startsWith('Durable:'));
  if (durableLines.length > 1) throw new ScriptContractError(file, 'declares Durable: more than once');
  let durable: DurabilityClass | undefined;
  if (durableLines.length === 1) {
    const d = /^Durable:\s+(money|messages)$/.exec(durableLines[0]);
    if (!d) throw new ScriptContractError(file, `"${durableLines[0]}": say "Durable: money" or "Durable: messages"`);
    durable = d[1] as DurabilityClass;
  }
  const lines = all.filter((l) => !l.startsWith('Durable:'));
  const firstSpec = lines.findIndex((l) => /^(KEYS|ARGV|Returns:)/.test(l));
  const purpose = lines
    .slice(0, firstSpec < 0 ? lines.length : firstSpec)
    .join(' ')
    .trim();
  if (purpose.length < 10) throw new ScriptContractError(file, 'contract must start with the purpose of the script');

  const keys: string[] = [];
  const argv: string[] = [];
  let returns = '';
  let argvNone = false;
  let inReturns = false;
  for (const line of lines.slice(firstSpec)) {
    const k = /^KEYS\[(\d+)\]\s+(\S.*)$/.exec(line);
    const a = /^ARGV\[(\d+)\]\s+(\S.*)$/.exec(line);
    if (k) {
      if (Number(k[1]) !== keys.length + 1) throw new ScriptContractError(file, `KEYS[${k[1]}] is out of order`);
      keys.push(k[2]);
      inReturns = false;
    } else if (a) {
      if (Number(a[1]) !== argv.length + 1) throw new ScriptContractError(file, `ARGV[${a[1]}] is out of order`);
      argv.push(a[2]);
      inReturns = false;
    } else if (/^ARGV\s+none$/.test(line)) {
      argvNone = true;
    } else if (/^Returns:/.test(line)) {
      inReturns = true;
      returns += line.slice('Returns:'.length).trim();
    } else if (inReturns && line) {
      returns += ` ${line}`;
    }
  }
  if (keys.length !== numberOfKeys) {
    throw new ScriptContractError(file, `file name says ${numberOfKeys} keys but the contract documents ${keys.length}`);
  }
  if (argv.length === 0 && !argvNone) throw new ScriptContractError(file, 'contract must list each ARGV[i], or say "ARGV  none"');
  if (!returns.trim()) throw new ScriptContractError(file, 'contract must say what the script Returns:');

  // The body may only use what the contract documents.
  const body = text.slice(m[0].length);
  for (const [, kind, idx] of body.matchAll(/\b(KEYS|ARGV)\[(\d+)\]/g)) {
    const max = kind === 'KEYS' ? keys.length : argv.length;
    if (Number(idx) > max) throw new ScriptContractError(file, `uses ${kind}[${idx}] but the contract documents ${max}`);
  }
  return { purpose, keys, argv, returns: returns.trim(), ...(durable && { durable }) };
}

function inlineIncludes(luaDir: string, file: string, text: string, seen: Set<string>): string {
  return text.replace(INCLUDE_RE, (_all, name: string) => {
    if (seen.has(name)) return `-- (${name} already included)`;
    seen.add(name);
    const path = join(luaDir, `${name}.lua`);
    let inc: string;
    try {
      inc = readFileSync(path, 'utf8');
    } catch {
      throw new ScriptContractError(file, `includes "${name}" but ${relative(luaDir, path)} does not exist`);
    }
    return `-- begin include ${name}\n${inlineIncludes(luaDir, path, inc, seen)}\n-- end include ${name}`;
  });
}

function walk(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const p = join(dir, name);
      return statSync(p).isDirectory() ? walk(p) : [p];
    });
}

/** Reads one script file: key count from the name, contract from the header, includes inlined. */
export function loadScriptFile(luaDir: string, path: string): ScriptDefinition {
  const rel = relative(luaDir, path).split(sep).join('/');
  const parts = rel.split('/');
  const m = FILE_RE.exec(parts[parts.length - 1]);
  if (parts.length !== 3 || !LAYERS.includes(parts[0]) || !m) {
    throw new ScriptContractError(rel, 'scripts live at lua/<platform|engines|features>/<module>/<name>-<numberOfKeys>.lua');
  }
  const numberOfKeys = Number(m[2]);
  const text = readFileSync(path, 'utf8');
  const contract = parseContract(rel, text, numberOfKeys);
  const source = inlineIncludes(luaDir, rel, text, new Set());
  const id = `${parts[1]}/${m[1]}`;
  return {
    id,
    file: rel,
    numberOfKeys,
    source,
    sha: createHash('sha1').update(source).digest('hex'),
    contract,
  };
}

/** Every script under `luaDir` except the `includes/` folders, by id (`<module>/<name>`). Throws on any contract error. */
export function loadAllScripts(luaDir = DEFAULT_LUA_DIR): Map<string, ScriptDefinition> {
  const out = new Map<string, ScriptDefinition>();
  for (const path of walk(luaDir)) {
    const rel = relative(luaDir, path).split(sep).join('/');
    if (rel.split('/').includes('includes') || !rel.endsWith('.lua')) continue;
    const def = loadScriptFile(luaDir, path);
    if (out.has(def.id)) throw new ScriptContractError(rel, `duplicates script id ${def.id}`);
    out.set(def.id, def);
  }
  return out;
}
