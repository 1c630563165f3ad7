import { type Clock, systemClock, type Timer } from '../workers/clock';

/** What the renewer drives: a hold whose lease it renews every `renewEveryMs`. */
export interface Renewable {
  readonly renewEveryMs: number;
  /** Called when the hold is due; the hold calls `add` again once its lease is renewed. */
  renewNow(): void;
}

/** The holds that share one renewal interval, in due order, and the one timer that serves them. */
interface Lane {
  every: number;
  /** Hold → when it is due (monotonic ms). Insertion order is due order: every hold joins at now + the same interval. */
  due: Map<Renewable, number>;
  timer?: Timer;
}

/**
 * The watchdogs of every hold in a process, on one timer per renewal interval
 * instead of one timer per hold: taking and giving back a hold is a Map insert
 * and delete instead of a Timeout object created, unref'd and cleared per hold.
 *
 * Every hold in a lane joins at now + the lane's interval, so the Map's
 * insertion order is due order. The timer is armed for the earliest hold;
 * when it fires it renews the holds that are due and re-arms for the next.
 * A hold released early leaves the timer armed for it: it then fires early,
 * finds nothing due and re-arms, so a due hold is never served late.
 */
export class LeaseRenewer {
  private readonly lanes = new Map<number, Lane>();
  private closed = false;

  constructor(private readonly clock: Clock = systemClock) {}

  /** Queues `hold` for renewal one interval from now (or moves it there). Does nothing once `clear()` has run. */
  add(hold: Renewable): void {
    if (this.closed) return;
    const every = hold.renewEveryMs;
    let lane = this.lanes.get(every);
    if (!lane) {
      lane = { every, due: new Map() };
      this.lanes.set(every, lane);
    }
    const dueAt = this.clock.now() + every;
    lane.due.delete(hold);
    lane.due.set(hold, dueAt);
    if (!lane.timer) this.arm(lane, dueAt);
  }

  delete(hold: Renewable): void {
    this.lanes.get(hold.renewEveryMs)?.due.delete(hold);
  }

  /** Holds waiting for their next renewal. */
  get size(): number {
    let n = 0;
    for (const lane of this.lanes.values()) n += lane.due.size;
    return n;
  }

  /** Lanes (distinct renewal intervals) in use. */
  get lanesInUse(): number {
    return this.lanes.size;
  }

  /**
   * Stops every timer and forgets every hold, for good: a renewal still on its way cannot queue its
   * hold again (shutdown: the leases then run out on their own).
   */
  clear(): void {
    this.closed = true;
    for (const lane of this.lanes.values()) this.clock.clearTimeout(lane.timer);
    this.lanes.clear();
  }

  private arm(lane: Lane, at: number): void {
    lane.timer = this.clock.setTimeout(() => this.fire(lane), at - this.clock.now());
  }

  private fire(lane: Lane): void {
    lane.timer = undefined;
    const now = this.clock.now();
    const due: Renewable[] = [];
    for (const [hold, at] of lane.due) {
      if (at > now) {
        this.arm(lane, at);
        break;
      }
      due.push(hold);
    }
    for (const hold of due) lane.due.delete(hold);
    // An empty lane goes (one per lease length ever used would otherwise stay); a renewed hold brings it back.
    if (lane.due.size === 0) this.lanes.delete(lane.every);
    for (const hold of due) hold.renewNow();
  }
}
