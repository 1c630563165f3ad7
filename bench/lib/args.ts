import { join, resolve } from 'node:path';
import { ROOT } from './full-stack';

/** The options every sectioned benchmark takes: `--quick`, `--only a,b`, `--dist DIR`. */
export interface SectionArgs<S extends string> {
  quick: boolean;
  sections: Set<S>;
  /** The build to measure (its dist/ dir; lua/ beside it). */
  dist: string;
}

/** Parses `--quick`, `--only <comma-separated sections>` and `--dist DIR`; anything else is an error naming the known options. */
export function parseSectionArgs<S extends string>(args: string[], known: readonly S[]): SectionArgs<S> {
  let quick = false;
  let only: S[] | undefined;
  let dist = join(ROOT, 'dist');
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--quick') quick = true;
    else if (a === '--dist') dist = resolve(args[++i] ?? 'dist');
    else if (a === '--only') {
      only = (args[++i] ?? '').split(',').filter(Boolean) as S[];
      if (only.length === 0 || only.some((s) => !known.includes(s))) throw new Error(`--only takes a comma-separated list of ${known.join(', ')}`);
    } else throw new Error(`unknown option ${a} (known: --quick, --only ${known.join(',')}, --dist DIR)`);
  }
  return { quick, sections: new Set(only ?? known), dist };
}
