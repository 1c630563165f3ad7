/** Plain commands of the red-envelope services. */
export interface CreateActivityCommand {
  activityId: string;
  sponsorMerchantId: string;
  title: string;
  currency: string;
  /** Minor units. */
  totalAmount: number;
  count: number;
  /** Epoch ms. */
  startsAt: number;
  endsAt: number;
  minAmount: number;
  perUserLimit: number;
  subPools: number;
}
