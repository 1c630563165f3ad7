import { LeaseRenewer, type Renewable } from './lease-renewer';

/** A hold that records when it was asked to renew and, like Hold, rejoins the renewer once "renewed". */
class FakeHold implements Renewable {
  readonly renewedAt: number[] = [];
  rejoin = true;

  constructor(
    private readonly renewer: LeaseRenewer,
    readonly renewEveryMs: number,
  ) {}

  renewNow(): void {
    this.renewedAt.push(performance.now());
    if (this.rejoin) this.renewer.add(this);
  }
}

describe(LeaseRenewer.name, () => {
  let renewer: LeaseRenewer;
  let t0: number;

  beforeEach(() => {
    jest.useFakeTimers();
    renewer = new LeaseRenewer();
    t0 = performance.now();
  });

  afterEach(() => {
    renewer.clear();
    jest.useRealTimers();
  });

  const at = (h: FakeHold) => h.renewedAt.map((t) => Math.round(t - t0));

  it('renews every hold once per interval, each on its own schedule', () => {
    const a = new FakeHold(renewer, 100);
    renewer.add(a);
    jest.advanceTimersByTime(40);
    const b = new FakeHold(renewer, 100);
    renewer.add(b);
    jest.advanceTimersByTime(400);
    expect(at(a)).toEqual([100, 200, 300, 400]);
    expect(at(b)).toEqual([140, 240, 340, 440]);
  });

  it('does not renew a hold once it is deleted, and a deleted first hold does not delay the next', () => {
    const a = new FakeHold(renewer, 100);
    const b = new FakeHold(renewer, 100);
    renewer.add(a);
    jest.advanceTimersByTime(30);
    renewer.add(b);
    renewer.delete(a);
    jest.advanceTimersByTime(300);
    expect(at(a)).toEqual([]);
    expect(at(b)).toEqual([130, 230, 330]);
    expect(renewer.size).toBe(1);
  });

  it('serves holds with different intervals from separate lanes', () => {
    const fast = new FakeHold(renewer, 10);
    const slow = new FakeHold(renewer, 1_000);
    renewer.add(slow);
    renewer.add(fast);
    jest.advanceTimersByTime(1_000);
    expect(at(fast)).toHaveLength(100);
    expect(at(slow)).toEqual([1_000]);
  });

  it('arms a timer again after its lane ran empty', () => {
    const a = new FakeHold(renewer, 50);
    a.rejoin = false;
    renewer.add(a);
    jest.advanceTimersByTime(200);
    expect(at(a)).toEqual([50]);
    expect(renewer.size).toBe(0);
    const b = new FakeHold(renewer, 50);
    renewer.add(b);
    jest.advanceTimersByTime(120);
    expect(at(b)).toEqual([250, 300]);
  });

  it('keeps one timer per lane however many holds it has', () => {
    const holds = Array.from({ length: 1_000 }, () => new FakeHold(renewer, 300));
    for (const h of holds) renewer.add(h);
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(300);
    expect(holds.every((h) => h.renewedAt.length === 1)).toBe(true);
    expect(jest.getTimerCount()).toBe(1);
  });

  it('stops everything at clear(), for good: a hold renewed afterwards is not queued again', () => {
    const a = new FakeHold(renewer, 10);
    renewer.add(a);
    renewer.clear();
    jest.advanceTimersByTime(100);
    expect(at(a)).toEqual([]);
    // A renewal that was on its way at shutdown comes back and re-adds its hold.
    renewer.add(a);
    jest.advanceTimersByTime(100);
    expect(at(a)).toEqual([]);
    expect(jest.getTimerCount()).toBe(0);
    expect(renewer.size).toBe(0);
  });

  it('drops a lane once it has no holds left', () => {
    for (let lease = 1; lease <= 50; lease++) {
      const h = new FakeHold(renewer, lease * 10);
      h.rejoin = false;
      renewer.add(h);
    }
    expect(renewer.lanesInUse).toBe(50);
    jest.advanceTimersByTime(500);
    expect(renewer.lanesInUse).toBe(0);
    expect(jest.getTimerCount()).toBe(0);
  });
});
