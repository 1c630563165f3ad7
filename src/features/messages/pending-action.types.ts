/** What a reminder for an unfinished action says, and after how long it is sent. */
export interface PendingActionType {
  delayMs: number;
  title: string;
  content: string;
  url: string;
}

/**
 * The actions the app reminds users about (unfinished actions such as password recovery). Delays can be
 * overridden per type with PENDING_ACTION_DELAYS.
 */
export const PENDING_ACTION_TYPES: Readonly<Record<string, PendingActionType>> = {
  PASSWORD_RECOVERY: {
    delayMs: 10 * 60_000,
    title: 'Still locked out?',
    content: 'Recover your password in seconds with face recognition.',
    url: 'redispay://security/password-recovery/face',
  },
  PAYMENT_PASSWORD_RESET: {
    delayMs: 10 * 60_000,
    title: 'Finish resetting your payment password',
    content: 'Verify with face recognition instead of your bank card.',
    url: 'redispay://security/payment-password/face',
  },
  BANK_CARD_BINDING: {
    delayMs: 30 * 60_000,
    title: 'Your card is not linked yet',
    content: 'Pick up where you left off and link your bank card.',
    url: 'redispay://wallet/cards/add',
  },
};

export const PENDING_ACTION_NAMES = Object.keys(PENDING_ACTION_TYPES);
