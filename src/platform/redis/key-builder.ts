import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config';

/**
 * A kind of hash tag: an `id` kind tags one thing of its kind, `{<kind>:<id>}`;
 * a `fixed` kind is one tag for the whole service, `{<kind>}`.
 */
export type KindArity = 'id' | 'fixed';
/** The kinds of tag of one key space, by kind name. */
export type KeyKinds = Readonly<Record<string, KindArity>>;

/**
 * The keys of one feature: its name (the module folder's, e.g. `orders`,
 * `delay-queue`) and the kinds of tag under it. Made only by `defineKeySpace`,
 * which registers it; `KeyBuilder.tagged()` takes it.
 */
export interface KeySpace<K extends KeyKinds = KeyKinds> {
  readonly feature: string;
  readonly kinds: K;
}

/** Feature, kind and part names: a lowercase word (with '-'), no ':', so that a key parses one way only. */
const NAME_RE = /^[a-z][a-z0-9-]{0,31}$/;
/** Ids (of tags and of parts): no braces (hash tags stay intact) and no whitespace. */
const ID_RE = /^[^{}\s]{1,128}$/;
const PART_ID_RE = /^[^{}\s]{1,256}$/;
const PREFIX_RE = /^[^{}\s:]{1,32}$/;

const hasOwn = (o: object, k: string) => Object.prototype.hasOwnProperty.call(o, k);

/** Every key space declared so far, by feature: the whole key space of the modules loaded. */
const SPACES = new Map<string, KeySpace>();

/**
 * Declares a module's key space, in the module's own keys file:
 * `export const ORDER_KEYS = defineKeySpace('orders', { s: 'id' })`.
 * Registered on import; a feature name declared twice (by two modules) throws,
 * as do names that would let a key parse two ways.
 */
export function defineKeySpace<const K extends Record<string, KindArity>>(feature: string, kinds: K): KeySpace<Readonly<K>> {
  if (typeof feature !== 'string' || !NAME_RE.test(feature)) throw new TypeError(`invalid key space name ${JSON.stringify(feature)}`);
  if (SPACES.has(feature)) throw new TypeError(`key space ${JSON.stringify(feature)} is declared twice`);
  const names = Object.keys(kinds);
  if (names.length === 0) throw new TypeError(`key space ${feature} declares no kind`);
  for (const kind of names) {
    if (!NAME_RE.test(kind)) throw new TypeError(`invalid key kind ${JSON.stringify(kind)} of ${feature}`);
    if (kinds[kind] !== 'id' && kinds[kind] !== 'fixed') throw new TypeError(`key kind ${feature}/${kind} must be 'id' or 'fixed'`);
  }
  const space: KeySpace<Readonly<K>> = Object.freeze({ feature, kinds: Object.freeze({ ...kinds }) });
  SPACES.set(feature, space);
  return space;
}

/** Every key space declared so far (by the keys files imported), in declaration order. */
export function keySpaces(): readonly KeySpace[] {
  return [...SPACES.values()];
}

/** The id argument of `tagged()`: one for an `id` kind, none for a `fixed` one. */
type IdArg<A extends KindArity> = A extends 'id' ? [id: string] : [];

/** A key taken apart: `<prefix>:<feature>:{<kind>[:<id>]}:<part>[:<partId>]`. */
export interface ParsedKey {
  feature: string;
  kind: string;
  id?: string;
  part: string;
  partId?: string;
}

/**
 * Keys that share one hash tag, so every key one script touches lies in one
 * Redis Cluster slot: `<prefix>:<feature>:{<kind>:<id>}:<part>[:<partId>]`.
 * Made only by `KeyBuilder.tagged()` (only the type is exported).
 */
class TaggedKeys {
  constructor(private readonly base: string) {}

  /** One key under the tag: a part name (`inbox`, `events`), or a part name and an id (`order`, `ord_…`). */
  key(part: string, id?: string): string {
    if (!NAME_RE.test(part)) throw new TypeError(`invalid key part ${JSON.stringify(part)}`);
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
   * The keys under one tag of a kind its key space declares (one cluster slot):
   * `tagged(MESSAGE_KEYS, 'a', accountId)`, `tagged(MESSAGE_KEYS, 'bc')`.
   */
  tagged<K extends KeyKinds, T extends keyof K & string>(space: KeySpace<K>, kind: T, ...id: IdArg<K[T]>): TaggedKeys {
    const feature = space?.feature;
    if (typeof feature !== 'string' || SPACES.get(feature) !== space) throw new TypeError(`unknown key space ${JSON.stringify(feature ?? space)}`);
    const kinds: KeyKinds = space.kinds;
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
   * Each key parses one way only (feature, kind and part names hold no ':'; ids hold no braces), which is
   * why two kinds can never share a key. Knows the key spaces declared so far (see keySpaces()).
   */
  parse(key: string): ParsedKey | undefined {
    const m = /^([^:]+):([^:]+):\{([^{}]+)\}:([^:]+)(?::(.+))?$/s.exec(key);
    if (!m || m[1] !== this.prefix) return undefined;
    const [, , feature, tag, part, partId] = m;
    const colon = tag.indexOf(':');
    const kind = colon < 0 ? tag : tag.slice(0, colon);
    const id = colon < 0 ? undefined : tag.slice(colon + 1);
    const kinds = SPACES.get(feature)?.kinds;
    if (kinds === undefined) return undefined;
    if (!hasOwn(kinds, kind) || (kinds[kind] === 'id') !== (id !== undefined)) return undefined;
    if ((id !== undefined && !ID_RE.test(id)) || !NAME_RE.test(part) || (partId !== undefined && !PART_ID_RE.test(partId))) return undefined;
    return { feature, kind, ...(id === undefined ? {} : { id }), part, ...(partId === undefined ? {} : { partId }) };
  }
}
