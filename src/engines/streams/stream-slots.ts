/** CRC16/XMODEM, the checksum Redis Cluster maps keys to slots with. */
function crc16(bytes: Buffer): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** The Redis Cluster slot of a key: of its hash tag (the first non-empty `{...}`) when it has one. */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  return crc16(Buffer.from(key, 'utf8')) % 16384;
}

/**
 * The streams one XREADGROUP may read together. A standalone or Sentinel Redis reads them all at
 * once; Redis Cluster refuses a command whose keys span slots (CROSSSLOT), so there it is one read
 * per slot, streams kept in the order given.
 */
export function readGroups<T extends { key: string }>(streams: readonly T[], cluster: boolean): T[][] {
  if (!cluster) return streams.length ? [[...streams]] : [];
  const bySlot = new Map<number, T[]>();
  for (const s of streams) {
    const slot = keySlot(s.key);
    const group = bySlot.get(slot);
    if (group) group.push(s);
    else bySlot.set(slot, [s]);
  }
  return [...bySlot.values()];
}
