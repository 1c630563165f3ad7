/**
 * The id rules every module shares: one definition per rule. The kernel imports nothing of the service.
 *
 * Where modules apply a rule of their own to the same kind of id (merchant ids below), each variant has its own
 * name and says who uses it: unifying them would change what is accepted.
 */

/** 1-64 of A-Z a-z 0-9 _ . : -, never `.` or `..`: a URL cannot carry those as a path segment. */
const URL_SAFE_ID_RE = /^(?!\.\.?$)[A-Za-z0-9_.:-]{1,64}$/;

/** An app account id (a bearer token's subject), as every module's account ids. */
export const ACCOUNT_ID_RE = URL_SAFE_ID_RE;

/**
 * Merchant ids as the routes and modules that take one in a body, a query or a URL admit them (seckill and
 * red-envelope activities, close-reminder settings, wallet owners): the account rule.
 */
export const MERCHANT_ID_RE = URL_SAFE_ID_RE;
/**
 * Merchant ids as the merchant signature (auth: X-Merchant-Id) and the rate-limit keys admit them: no `:`, and
 * `.`/`..` are not refused (the merchant must also be configured, and merchant names are configured by this rule).
 */
export const SIGNED_MERCHANT_ID_RE = /^[A-Za-z0-9_.-]{1,64}$/;
/**
 * Merchant ids as the orders module's in-process commands check them: a superset of SIGNED_MERCHANT_ID_RE and of
 * MERCHANT_ID_RE (`:` allowed, `.`/`..` not refused), so no merchant another module admits is refused there.
 */
export const ORDER_COMMAND_MERCHANT_ID_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

/** A merchant's own order number: `.` and `..` refused, they name a path segment, so such an order could not be addressed in a URL. */
export const MERCHANT_ORDER_NO_RE = URL_SAFE_ID_RE;
/**
 * The numbers the service gives orders it makes itself: a flash-sale reservation's order is numbered with the
 * reservation id. A merchant's own order can never take one (the merchant API refuses them), so the two never meet.
 */
export const SYSTEM_ORDER_NO_RE = /^sk_[0-9a-f]{24}$/;
/** The service's order ids. */
export const ORDER_ID_RE = /^ord_[0-9a-f]{24}$/;
/** A payment plan's id: its order's id, `_p` and its number within the order. */
export const PLAN_ID_RE = /^(ord_[0-9a-f]{24})_p([1-9][0-9]{0,5})$/;

/** An app's request id for idempotent retries (a flash-sale reservation's requestId): the account rule. */
export const REQUEST_ID_RE = URL_SAFE_ID_RE;

/** Activity ids (flash sales, red-envelope rains): short, because they are part of every shard's or sub-pool's tag. */
export const ACTIVITY_ID_RE = /^[A-Za-z0-9_-]{1,32}$/;

/** Wallet references: with the kind, what makes a credit or debit idempotent, per wallet ('|' is never in one: see lua/features/wallet/includes/wallet-ledger.lua). */
export const REFERENCE_RE = /^[A-Za-z0-9_.:-]{1,128}$/;
