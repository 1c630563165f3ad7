import { InvalidArgumentError } from '../../platform/core/domain.error';
import { MAX_AMOUNT } from '../../platform/core/money';
import type { ActivityDto } from './dto';
import type { ActivityCommand } from './seckill.commands';

export interface ActivityLimits {
  maxProducts: number;
  maxShards: number;
}

/** How far ahead a start may be: keys (and, for a rain, the sponsor's money) are not held for years. */
const MAX_LEAD_MS = 366 * 86_400_000;
const invalid = (field: string, message: string) => new InvalidArgumentError(`${field}: ${message}`, field, message);

/**
 * The activity command of a validated body, with the rules that span fields (400 naming the field, nothing
 * stored): the window, unique product ids, shards within the stock and the configured maximum, and an amount
 * (price × limit) an order can carry. `pathId`: for an edit, the body's activityId must be the path's.
 */
export function toActivityCommand(dto: ActivityDto, limits: ActivityLimits, bodyId?: string): ActivityCommand {
  if (bodyId !== undefined && bodyId !== dto.activityId) throw invalid('activityId', 'activityId must be the one in the path');
  const startsAt = Date.parse(dto.startsAt);
  const endsAt = Date.parse(dto.endsAt);
  if (startsAt - Date.now() > MAX_LEAD_MS) throw invalid('startsAt', 'an activity starts at most 366 days from now');
  if (!(endsAt > startsAt)) throw invalid('endsAt', 'endsAt must be after startsAt');
  if (endsAt - startsAt > 31 * 86_400_000) throw invalid('endsAt', 'an activity lasts at most 31 days');
  if (endsAt <= Date.now()) throw invalid('endsAt', 'endsAt must be in the future');
  if (dto.products.length > limits.maxProducts) throw invalid('products', `products must hold at most ${limits.maxProducts} products`);
  const perUserLimit = dto.perUserLimit ?? 1;
  const seen = new Set<string>();
  dto.products.forEach((p, i) => {
    if (seen.has(p.productId)) throw invalid(`products[${i}].productId`, `productId ${p.productId} appears twice`);
    seen.add(p.productId);
    const shards = p.shards ?? 1;
    if (shards > limits.maxShards) throw invalid(`products[${i}].shards`, `shards must be at most ${limits.maxShards}`);
    if (shards > p.stock) throw invalid(`products[${i}].shards`, 'shards must be at most the stock');
    if (p.price * (p.perUserLimit ?? perUserLimit) > MAX_AMOUNT) throw invalid(`products[${i}].price`, `price × perUserLimit must be at most ${MAX_AMOUNT}`);
  });
  return {
    activityId: dto.activityId,
    merchantId: dto.merchantId,
    title: dto.title,
    startsAt,
    endsAt,
    payWindowMinutes: dto.payWindowMinutes ?? 15,
    perUserLimit,
    ...(dto.eligibleAccounts ? { eligibleAccounts: dto.eligibleAccounts } : {}),
    products: dto.products.map((p) => ({
      productId: p.productId,
      title: p.title,
      price: p.price,
      currency: p.currency,
      stock: p.stock,
      ...(p.perUserLimit !== undefined ? { perUserLimit: p.perUserLimit } : {}),
      shards: p.shards ?? 1,
    })),
  };
}
