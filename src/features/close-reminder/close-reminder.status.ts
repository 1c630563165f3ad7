import { Injectable } from '@nestjs/common';
import type { ReminderStatusDto } from './dto/settings.dto';
import { CloseReminderStore } from './close-reminder.store';

const iso = (ms: number | undefined) => (ms ? new Date(ms).toISOString() : undefined);

/** One order's reminder as ops see it. */
@Injectable()
export class CloseReminderStatus {
  constructor(private readonly store: CloseReminderStore) {}

  async of(orderId: string): Promise<ReminderStatusDto> {
    const r = await this.store.record(orderId);
    if (!r) return { orderId, state: 'none' };
    const view: Record<string, string | undefined> = {
      orderId,
      state: r.state,
      merchantId: r.merchantId,
      dueAt: iso(r.dueAt),
      closesAt: iso(r.expiresAt),
      scheduledAt: iso(r.scheduledAt),
      payerAccountId: r.payer,
      msgId: r.msgId,
      sentAt: iso(r.sentAt),
      cause: r.cause,
      cancelledAt: iso(r.cancelledAt),
      withdrawnAt: iso(r.withdrawnAt),
      reason: r.reason,
      skippedAt: iso(r.skippedAt),
    };
    return Object.fromEntries(Object.entries(view).filter(([, v]) => v !== undefined && v !== '')) as unknown as ReminderStatusDto;
  }
}
