import { DomainError } from '../../platform/core/domain.error';

/** A debit that would take a balance below zero (409); nothing was stored. */
export class InsufficientFundsError extends DomainError {
  readonly kind = 'conflict';

  constructor(details?: { currency: string; balance: number; amount: number }) {
    super('INSUFFICIENT_FUNDS', 'The wallet holds too little in this currency; nothing was taken', details);
  }
}

/** A reference already applied with another amount, currency or direction (409); nothing was stored. */
export class ReferenceReusedError extends DomainError {
  readonly kind = 'conflict';

  constructor(details?: { reference: string; entryId: string }) {
    super('REFERENCE_REUSED', 'This reference was already applied to the wallet with another amount, currency or direction', details);
  }
}

/** A credit that would take a balance past the greatest one a wallet holds (2^53 − 1 minor units) (409). */
export class BalanceLimitError extends DomainError {
  readonly kind = 'conflict';

  constructor(details?: { currency: string; balance: number }) {
    super('BALANCE_LIMIT', 'The balance would exceed the greatest one a wallet holds; nothing was stored', details);
  }
}

/** A reference voided by a settling query (`WalletService.settle`): it can never be applied (409); nothing was stored. */
export class ReferenceVoidedError extends DomainError {
  readonly kind = 'conflict';

  constructor(details?: { reference: string }) {
    super('REFERENCE_VOIDED', 'This reference was settled as never applied, and can no longer be', details);
  }
}
