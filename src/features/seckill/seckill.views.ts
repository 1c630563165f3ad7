import type { ProductStock } from './seckill-activities.service';
import type { ActivityViewDto, ReservationDto } from './dto';
import { stateOf } from './listing.service';
import type { ReservationView } from './reservations.service';
import type { ActivityRecord } from './seckill.types';

const iso = (ms: number) => new Date(ms).toISOString();

/** An activity as ops see it, with each product's live stock. */
export function activityView(a: ActivityRecord, stock: Map<string, ProductStock>): ActivityViewDto {
  return {
    activityId: a.activityId,
    merchantId: a.merchantId,
    title: a.title,
    startsAt: iso(a.startsAt),
    endsAt: iso(a.endsAt),
    ...(a.endedAt ? { endedAt: iso(a.endedAt) } : {}),
    state: stateOf(a),
    payWindowMinutes: a.payWindowMinutes,
    perUserLimit: a.perUserLimit,
    restricted: a.restricted,
    eligibleCount: a.eligibleCount,
    updatedAt: iso(a.updatedAt),
    products: a.products.map((p) => {
      const s = stock.get(p.productId);
      return {
        productId: p.productId,
        title: p.title,
        price: p.price,
        currency: p.currency,
        stock: p.stock,
        ...(p.perUserLimit !== undefined ? { perUserLimit: p.perUserLimit } : {}),
        shards: p.shards,
        available: s?.available ?? 0,
        reserved: s?.reserved ?? 0,
        sold: s?.sold ?? 0,
        returned: s?.released ?? 0,
      };
    }),
  };
}

export function reservationView(r: ReservationView): ReservationDto {
  return { ...r, expiresAt: iso(r.expiresAt), createdAt: iso(r.createdAt) };
}
