import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config';

/**
 * Every kind of hash tag the service makes, by feature: the whole key space.
 * An `id` kind tags one thing of its kind, `{<kind>:<id>}`; a `fixed` kind is
 * one tag for the whole service, `{<kind>}`. Kind names hold no ':', so the
 * kind is whatever precedes the tag's first ':' (or the whole tag): no id can
 * spell another kind's tag. A new kind of key is a new line here.
 */
export const TAG_KINDS = {
  /** Message center: one account's inbox (`a`); the broadcast feed (`bc`). */
  msg: { a: 'id', bc: 'fixed' },
  /** Orders: one shard's orders, plans and event streams. */
  ord: { s: 'id' },
  /** Locks, by lock name. */
  lock: { n: 'id' },
  /** Delay queues: one queue (`q`); the registry of queue names (`reg`). */
  dq: { q: 'id', reg: 'fixed' },
  /** Rate-limit windows, by caller kind and caller id (anonymous callers by IP). */
  rate: { user: 'id', merchant: 'id', service: 'id', admin: 'id', anonymous: 'id' },
  /** Signed-request nonces, by merchant. */
  auth: { m: 'id' },
  /** The diagnostics visit counters, by account. */
  diagnostics: { a: 'id' },
} as const satisfies Record<string, Record<string, 'id' | 'fixed'>>;

type Kinds = typeof TAG_KINDS;
export type Feature = keyof Kinds;
export type TagKind<F extends Feature> = keyof Kinds[F] & string;
/** The id argument of `tagged()`: one for an `id` kind, none for a `fixed` one. */
type IdArg<F extends Feature, K extends TagKind<F>> = Kinds[F][K] extends 'id' ? [id: string] : [];

/** Ids (of tags and of parts): no braces (hash tags stay intact) and no whitespace. */
const ID_RE = /^[^{}\s]{1,128}$/;
const PART_ID_RE = /^[^{}\s]{1,256}$/;
/** Part names, like feature and kind names, hold no ':' so that a key parses one way only. */
const PART_RE = /^[a-z][a-z0-9-]{0,31}$/;
const PREFIX_RE = /^[^{}\s:]{1,32}$/;

/** A key taken apart: `<prefix>:<feature>:{<kind>[:<id>]}:<part>[:<partId>]`. */
export interface ParsedKey {
  feature: string;
  kind: string;
  id?: string;
  part: string;
  partId?: string;
}

const hasOwn = (o: object, k: string) => Object.prototype.hasOwnProperty.call(o, k);

/**
 * Keys that share one hash tag, so every key one script touches lies in one
 * Redis Cluster slot: `<prefix>:<feature>:{<kind>:<id>}:<part>[:<partId>]`.
 * Made only by `KeyBuilder.tagged()` (only the type is exported).
 */
class TaggedKeys {
  constructor(private readonly base: string) {}

  /** One key under the tag: a part name (`inbox`, `events`), or a part name and an id (`order`, `ord_…`). */
  key(part: string, id?: string): string {
    if (!PART_RE.test(part)) throw new TypeError(`invalid key part ${JSON.stringify(part)}`);
    if (id === undefined) return this.base + part;
    if (!PART_ID_RE.test(id)) throw new TypeError(`invalid key part id ${JSON.stringify(id)}`);
    return `${this.base}${part}:${id}`;
  }
}

export type { TaggedKeys };

/** The single place keys are built. Nothing else concatenates key strings. */
@Injectable()
export class KeyBuilder {
  readonly prefix: string;

  constructor(config: AppConfig) {
    if (!PREFIX_RE.test(config.redis.keyPrefix)) throw new TypeError(`invalid key prefix ${JSON.stringify(config.redis.keyPrefix)}`);
    this.prefix = config.redis.keyPrefix;
  }

  /**
   * The keys under one tag of one of the kinds in TAG_KINDS (one cluster slot):
   * `tagged('msg', 'a', accountId)`, `tagged('msg', 'bc')`.
   */
  tagged<F extends Feature, K extends TagKind<F>>(feature: F, kind: K, ...id: IdArg<F, K>): TaggedKeys {
    if (!hasOwn(TAG_KINDS, feature)) throw new TypeError(`invalid feature ${JSON.stringify(feature)}`);
    const kinds: Record<string, 'id' | 'fixed'> = TAG_KINDS[feature];
    if (!hasOwn(kinds, kind)) throw new TypeError(`invalid key kind ${JSON.stringify(kind)} of ${feature}`);
    const [tagId] = id as string[];
    if (kinds[kind] === 'fixed') {
      if (tagId !== undefined) throw new TypeError(`key kind ${feature}/${kind} takes no id`);
      return new TaggedKeys(`${this.prefix}:${feature}:{${kind}}:`);
    }
    if (typeof tagId !== 'string' || !ID_RE.test(tagId)) throw new TypeError(`invalid key tag id ${JSON.stringify(tagId)}`);
    return new TaggedKeys(`${this.prefix}:${feature}:{${kind}:${tagId}}:`);
  }

  /**
   * The inverse of `tagged().key()`: what a key of this prefix is, or undefined when no call makes it.
   * Each key parses one way only (see TAG_KINDS), which is why two kinds can never share a key.
   */
  parse(key: string): ParsedKey | undefined {
    const m = /^([^:]+):([^:]+):\{([^{}]+)\}:([^:]+)(?::(.+))?$/s.exec(key);
    if (!m || m[1] !== this.prefix) return undefined;
    const [, , feature, tag, part, partId] = m;
    const colon = tag.indexOf(':');
    const kind = colon < 0 ? tag : tag.slice(0, colon);
    const id = colon < 0 ? undefined : tag.slice(colon + 1);
    if (!hasOwn(TAG_KINDS, feature)) return undefined;
    const kinds: Record<string, 'id' | 'fixed'> = TAG_KINDS[feature as Feature];
    if (!hasOwn(kinds, kind) || (kinds[kind] === 'id') !== (id !== undefined)) return undefined;
    if ((id !== undefined && !ID_RE.test(id)) || !PART_RE.test(part) || (partId !== undefined && !PART_ID_RE.test(partId))) return undefined;
    return { feature, kind, ...(id === undefined ? {} : { id }), part, ...(partId === undefined ? {} : { partId }) };
  }
}
