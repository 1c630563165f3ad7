import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config';

const TAG_RE = /^[^{}\s]{1,128}$/;
const PART_RE = /^[^{}\s]{1,256}$/;

/**
 * Keys that share one hash tag, so every key one script touches lies in one
 * Redis Cluster slot: `<prefix>:<feature>:{<tag>}:<part>`.
 */
export class TaggedKeys {
  private readonly base: string;

  constructor(prefix: string, feature: string, tag: string) {
    if (!TAG_RE.test(tag)) throw new TypeError(`invalid key tag ${JSON.stringify(tag)}`);
    this.base = `${prefix}:${feature}:{${tag}}:`;
  }

  /** The full key for one part, e.g. `rp:seckill:{sale42}:stock`. */
  key(part: string): string {
    if (!PART_RE.test(part)) throw new TypeError(`invalid key part ${JSON.stringify(part)}`);
    return this.base + part;
  }

  /** The shared head of every key under this tag (for key-building inside Lua). */
  get head(): string {
    return this.base;
  }
}

/** The single place keys are built. Nothing else concatenates key strings. */
@Injectable()
export class KeyBuilder {
  readonly prefix: string;

  constructor(config: AppConfig) {
    this.prefix = config.redis.keyPrefix;
  }

  /** Keys of one feature grouped under one hash tag (one cluster slot). */
  tagged(feature: string, tag: string): TaggedKeys {
    if (!/^[a-z][a-z0-9-]{0,31}$/.test(feature)) throw new TypeError(`invalid feature ${JSON.stringify(feature)}`);
    return new TaggedKeys(this.prefix, feature, tag);
  }
}
