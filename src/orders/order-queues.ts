/** Delay-queue names of the orders module. */
export const EXPIRY_QUEUE = 'order-expiry';
/** Instructions with an unknown outcome, queried until the channel answers; id `<planId>:<index>`. */
export const QUERY_QUEUE = 'payment-queries';
/** Reversals the channel did not confirm at once, retried; id `<planId>:<index>`. */
export const REVERSAL_QUEUE = 'payment-reversals';

export interface LegRef {
  planId: string;
  index: number;
}

/** The stable id of one instruction: the delay-queue id and the reference sent to the channel. */
export const legId = (planId: string, index: number) => `${planId}:${index}`;
