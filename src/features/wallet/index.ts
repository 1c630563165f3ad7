/**
 * The wallet module's public file: what other features may use. Anything not
 * exported here is the module's own (lint: feature-through-public-file).
 */
export { WalletModule } from './wallet.module';
export { WalletService } from './wallet.service';
export { walletKeys } from './wallet.keys';
export type { WalletEntry } from './wallet.types';
export { InsufficientFundsError, ReferenceReusedError, ReferenceVoidedError } from './wallet.errors';
