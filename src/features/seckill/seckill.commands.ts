/** Plain commands of the flash-sale services. Controllers map their DTOs to these. */

export interface ProductCommand {
  productId: string;
  title: string;
  /** Minor units. */
  price: number;
  currency: string;
  stock: number;
  perUserLimit?: number;
  /** Sub-stocks on different hash slots (default 1). */
  shards?: number;
}

export interface ActivityCommand {
  activityId: string;
  merchantId: string;
  title: string;
  /** Epoch ms. */
  startsAt: number;
  endsAt: number;
  payWindowMinutes: number;
  perUserLimit: number;
  /** Only these accounts may buy; absent: anyone. */
  eligibleAccounts?: string[];
  products: ProductCommand[];
}

export interface ReserveCommand {
  accountId: string;
  activityId: string;
  productId: string;
  quantity: number;
  requestId: string;
}
