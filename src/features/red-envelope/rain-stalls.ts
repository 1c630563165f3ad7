import { Injectable, Logger } from '@nestjs/common';
import { RedEnvelopeConfig } from './red-envelope.config';
import { RedEnvelopeMetrics } from './red-envelope.metrics';
import { RedEnvelopeStore } from './red-envelope.store';
import type { Stall } from './red-envelope.types';

/** The stall reason of grabs whose crediting was given up (ops re-drive them). */
export const DEAD_LETTERED = 'grabs dead-lettered: their wallet credit failed RED_ENVELOPE_CREDIT_MAX_DELIVERIES times';

/**
 * A rain step that cannot advance is never silent: it is recorded for the admin view (`stalled`), logged at error and
 * counted in `red_envelope_stalls_total{step}`, once per distinct cause (the same step and reason again, however often
 * its job retries, is neither logged nor counted again). The way out is in docs/modules/red-envelope.md.
 */
@Injectable()
export class RainStalls {
  private readonly logger = new Logger('RedEnvelopeStalls');

  constructor(
    private readonly store: RedEnvelopeStore,
    private readonly metrics: RedEnvelopeMetrics,
    private readonly config: RedEnvelopeConfig,
  ) {}

  /** Reports that `step` of the rain cannot advance, for `reason`; never throws (a failure to record is logged). */
  async note(a: { activityId: string; endsAt: number }, step: Stall['step'], reason: string): Promise<void> {
    try {
      if (!(await this.store.noteStall(a.activityId, step, reason, a.endsAt + this.config.liveRetentionMs))) return;
    } catch (err) {
      this.logger.error({ activityId: a.activityId, step, reason, err: (err as Error).message }, 'rain step stalled (not recorded)');
      return;
    }
    this.metrics.stalls.inc({ step });
    this.logger.error({ activityId: a.activityId, step, reason }, 'rain step stalled; see docs/modules/red-envelope.md for the way out');
  }

  /** Reports a refusal that ended the rain (nothing of it was kept, so there is no stall to show). */
  refused(activityId: string, step: Stall['step'], reason: string): void {
    this.metrics.stalls.inc({ step });
    this.logger.error({ activityId, step, reason }, 'rain refused at this step; nothing of it was kept');
  }

  /** The step has advanced (or, with none named, the rain has): the stall is gone. */
  clear(activityId: string, step?: Stall['step']): Promise<void> {
    return this.store.clearStall(activityId, step).catch(() => undefined);
  }
}
