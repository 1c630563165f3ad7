import { Hold, type HoldHost } from './hold';
import { LeaseRenewer } from './lease-renewer';
import { type Clock, systemClock } from '../workers/clock';
import { LockLostError } from './lock.errors';

/** An engine that answers renewals as the test says and records what the holds asked of it. */
class FakeHost implements HoldHost {
  readonly clock: Clock = systemClock;
  readonly renewer = new LeaseRenewer(this.clock);
  /** When the test began, on the (fake) clock. */
  readonly t0 = this.clock.now();
  readonly log: string[] = [];
  readonly lost: string[] = [];
  readonly ended: Hold[] = [];
  /** What the next renewal does; by default it extends the lease. */
  renew: () => Promise<number> = () => Promise.resolve(1);

  renewHold(): Promise<number> {
    this.log.push(`renew@${Math.round(this.clock.now() - this.t0)}`);
    return this.renew();
  }

  releaseHold(): Promise<void> {
    this.log.push(`release@${Math.round(this.clock.now() - this.t0)}`);
    return Promise.resolve();
  }

  noteLost(_h: Hold, reason: string): void {
    this.lost.push(reason);
  }

  holdEnded(h: Hold): void {
    this.ended.push(h);
  }
}

describe(Hold.name, () => {
  let host: FakeHost;

  beforeEach(() => {
    jest.useFakeTimers();
    host = new FakeHost();
  });

  afterEach(() => {
    host.renewer.clear();
    jest.useRealTimers();
  });

  function hold(leaseMs: number): Hold {
    const h = new Hold({
      host,
      name: 'n',
      keys: { hash: 'h', fence: 'f', channel: 'c' },
      owner: 'o',
      mode: 'write',
      fencingToken: 7,
      expiresAt: 0,
      holdCount: 1,
      leaseMs,
      localDeadline: host.clock.now() + leaseMs,
    });
    h.startWatchdog();
    return h;
  }

  it('renews every third of its lease while held, and never after its release', async () => {
    const h = hold(300);
    await jest.advanceTimersByTimeAsync(350);
    expect(host.log).toEqual(['renew@100', 'renew@200', 'renew@300']);
    await h.release();
    await jest.advanceTimersByTimeAsync(1_000);
    expect(host.log).toEqual(['renew@100', 'renew@200', 'renew@300', 'release@350']);
    expect(host.ended).toEqual([h]);
    expect(h.signal.aborted).toBe(false);
  });

  it('sends its release only after a renewal already on its way has been answered', async () => {
    let answer!: (v: number) => void;
    host.renew = () => new Promise<number>((r) => (answer = r));
    const h = hold(300);
    await jest.advanceTimersByTimeAsync(100);
    const released = h.release();
    await jest.advanceTimersByTimeAsync(50);
    expect(host.log).toEqual(['renew@100']);
    answer(1);
    await released;
    expect(host.log).toEqual(['renew@100', 'release@150']);
    await jest.advanceTimersByTimeAsync(1_000);
    expect(host.log).toHaveLength(2);
  });

  it('aborts its signal with LockLostError when a renewal finds the lease gone, and sends no release then', async () => {
    host.renew = () => Promise.reject(new LockLostError('n', 'o'));
    const h = hold(300);
    const signal = h.signal;
    await jest.advanceTimersByTimeAsync(100);
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBeInstanceOf(LockLostError);
    expect(host.lost).toEqual(['the lease ended before it was renewed']);
    expect(host.ended).toEqual([h]);
    await h.release();
    await jest.advanceTimersByTimeAsync(1_000);
    expect(host.log).toEqual(['renew@100']);
  });

  it('retries a renewal Redis does not answer until the lease surely ended, then counts the hold lost', async () => {
    host.renew = () => Promise.reject(new Error('Connection is closed.'));
    const h = hold(300);
    await jest.advanceTimersByTimeAsync(299);
    // Due at 100, then a retry every 50 ms (a tenth of the lease, at least 50) while the lease may still be ours.
    expect(host.log).toEqual(['renew@100', 'renew@150', 'renew@200', 'renew@250']);
    expect(h.signal.aborted).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    expect(h.signal.aborted).toBe(true);
    expect(host.lost).toEqual(['Redis could not renew the lease before it ended']);
    await jest.advanceTimersByTimeAsync(1_000);
    expect(host.log).toHaveLength(5);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('goes back to its regular renewals when Redis answers again before the lease ended', async () => {
    let down = true;
    host.renew = () => (down ? Promise.reject(new Error('Connection is closed.')) : Promise.resolve(1));
    const h = hold(300);
    await jest.advanceTimersByTimeAsync(100);
    down = false;
    await jest.advanceTimersByTimeAsync(350);
    // The retry at 150 renews; the next renewals come a third of the lease apart from it.
    expect(host.log).toEqual(['renew@100', 'renew@150', 'renew@250', 'renew@350', 'renew@450']);
    expect(h.signal.aborted).toBe(false);
  });

  it('stops renewing at stopWatchdog (shutdown), leaving the lease to run out', async () => {
    const h = hold(300);
    await jest.advanceTimersByTimeAsync(100);
    h.stopWatchdog();
    await jest.advanceTimersByTimeAsync(1_000);
    expect(host.log).toEqual(['renew@100']);
    expect(h.signal.aborted).toBe(false);
  });
});
