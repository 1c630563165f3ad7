import { Injectable } from '@nestjs/common';
import { SingleFlightCatalog } from '../../engines/sharded-pool/single-flight-catalog';
import { SeckillStore } from './seckill.store';
import type { ActivityRecord, ProductRecord } from './seckill.types';

/** An activity as the request paths use it: its record and its products by id. */
export interface Activity extends ActivityRecord {
  productsById: Map<string, ProductRecord>;
}

/**
 * Each instance's copy of the activities it serves (the sharded-pool engine's single-flight catalog): the
 * reservation and listing paths never read the configuration from Redis per request.
 */
@Injectable()
export class ActivityCatalog extends SingleFlightCatalog<Activity> {
  constructor(store: SeckillStore) {
    super((id) => store.activity(id).then((a) => (a ? withIndex(a) : null)));
  }
}

export function withIndex(a: ActivityRecord): Activity {
  return { ...a, productsById: new Map(a.products.map((p) => [p.productId, p])) };
}
