/**
 * Routes whose documented largest body is bigger than BODY_LIMIT_BYTES, with
 * their own limit in bytes. Every other route keeps the global limit.
 */
export const ROUTE_BODY_LIMITS: ReadonlyMap<string, number> = new Map([
  // 500 messages of up to ~6.3 KiB each (2,000-character content, two 2,048-character links).
  ['POST /messages/batch', 4 * 1024 * 1024],
  // 10,000 account ids of up to 64 characters.
  ['POST /admin/messages/broadcast', 1024 * 1024],
  // 10,000 products of up to ~400 bytes and 50,000 eligible account ids of up to 64 characters.
  ['POST /admin/seckill/activities', 8 * 1024 * 1024],
  ['PUT /admin/seckill/activities/:activityId', 8 * 1024 * 1024],
]);
