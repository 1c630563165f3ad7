import { clipUnits } from '../../platform/core/text';
import { InvalidArgumentError } from '../../platform/core/domain.error';
import type { CreateRedEnvelopeActivityDto } from './dto/red-envelope-activity.dto';
import type { CreateActivityCommand } from './red-envelope.commands';

/** The wallet memo of a rain's entries: its title's first 64 UTF-16 units, never half of a surrogate pair. */
export const memoOf = (title: string): string => clipUnits(title, 64);

/** How far ahead a start may be: keys (and, for a rain, the sponsor's money) are not held for years. */
const MAX_LEAD_MS = 366 * 86_400_000;
const invalid = (field: string, message: string) => new InvalidArgumentError(`${field}: ${message}`, field, message);

/**
 * The rules of a new rain that depend on the time (400 naming the field): checked only when the rain is to be made,
 * so that the same create again, after the window, answers the existing rain.
 */
export function checkTiming(cmd: { startsAt: number; endsAt: number }, now = Date.now()): void {
  if (cmd.startsAt - now > MAX_LEAD_MS) throw invalid('startsAt', 'a rain starts at most 366 days from now');
  if (cmd.endsAt <= now) throw invalid('endsAt', 'endsAt must be in the future');
}

/**
 * The command of a validated body, with the rules that span fields (400 naming the field, nothing stored or debited);
 * the ones that depend on the time are `checkTiming`'s.
 */
export function toCreateCommand(dto: CreateRedEnvelopeActivityDto, limits: { maxCount: number; maxSubPools: number }): CreateActivityCommand {
  const startsAt = Date.parse(dto.startsAt);
  const endsAt = Date.parse(dto.endsAt);
  if (!(endsAt > startsAt)) throw invalid('endsAt', 'endsAt must be after startsAt');
  if (endsAt - startsAt > 7 * 86_400_000) throw invalid('endsAt', 'a rain lasts at most 7 days');
  if (dto.count > limits.maxCount) throw invalid('count', `count must be at most ${limits.maxCount}`);
  const minAmount = dto.minAmount ?? 1;
  if (dto.totalAmount < dto.count * minAmount) throw invalid('totalAmount', `totalAmount must be at least count × minAmount (${dto.count * minAmount})`);
  const subPools = dto.subPools ?? 1;
  if (subPools > limits.maxSubPools) throw invalid('subPools', `subPools must be at most ${limits.maxSubPools}`);
  if (subPools > dto.count) throw invalid('subPools', 'subPools must be at most the count');
  return {
    activityId: dto.activityId,
    sponsorMerchantId: dto.sponsorMerchantId,
    title: dto.title,
    currency: dto.currency,
    totalAmount: dto.totalAmount,
    count: dto.count,
    startsAt,
    endsAt,
    minAmount,
    perUserLimit: dto.perUserLimit ?? 1,
    subPools,
  };
}
