import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { drainUnreadBody } from './unread-body';

const body = () => Object.assign(new PassThrough(), { complete: false }) as unknown as IncomingMessage & PassThrough;

describe('drainUnreadBody', () => {
  it('reads the rest of the body to its end, then resolves', async () => {
    const raw = body();
    let done = false;
    const drained = drainUnreadBody(raw, 1024, 10_000).then(() => (done = true));
    raw.write(Buffer.alloc(100));
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    raw.end(Buffer.alloc(100));
    await drained;
    expect(done).toBe(true);
  });

  it('stops after maxBytes more bytes, however long the body', async () => {
    const raw = body();
    const drained = drainUnreadBody(raw, 1024, 10_000);
    for (let i = 0; i < 3; i++) raw.write(Buffer.alloc(512));
    await expect(drained).resolves.toBeUndefined();
    expect(raw.writableEnded).toBe(false);
  });

  it('stops after maxMs when the body stalls', async () => {
    const raw = body();
    const started = Date.now();
    await drainUnreadBody(raw, 1024, 50);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
  });

  it('resolves at once for a body already read to its end, even when `complete` is not set', async () => {
    const raw = body();
    raw.end(Buffer.alloc(10));
    raw.resume();
    await new Promise((r) => raw.once('end', r));
    const started = Date.now();
    await drainUnreadBody(raw, 1024, 60_000);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('resolves at once for a request already read', async () => {
    const raw = Object.assign(body(), { complete: true });
    await expect(drainUnreadBody(raw, 1, 60_000)).resolves.toBeUndefined();
  });
});
