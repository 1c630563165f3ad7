import { hash } from 'node:crypto';

/*
 * One-shot digests (node:crypto `hash`): no Hash object is made, updated and finished, which for the short inputs
 * hashed on every request (reservation and order ids, cache keys, home shards) takes about half the time of
 * `createHash(alg).update(data).digest()`. Text is hashed as UTF-8, as `update` hashes it.
 */

/** hex(sha256(data)). */
export const sha256Hex = (data: Buffer | string): string => hash('sha256', data, 'hex');

/** hex(md5(data)). */
export const md5Hex = (data: Buffer | string): string => hash('md5', data, 'hex');

/** md5(data), as bytes. */
export const md5Bytes = (data: Buffer | string): Buffer => hash('md5', data, 'buffer');
