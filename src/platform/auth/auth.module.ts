import { Module } from '@nestjs/common';
import { RateLimitModule } from '../rate-limit/rate-limit.module';
import { JwtVerifier } from './jwt-verifier.service';
import { MerchantVerifier } from './merchant-verifier.service';

/** The identity layer: the verifiers behind `AuthGuard` (registered globally, first, by AppModule). Routes opt in with `@Auth(...)`. */
@Module({
  imports: [RateLimitModule],
  providers: [JwtVerifier, MerchantVerifier],
  exports: [JwtVerifier, MerchantVerifier, RateLimitModule],
})
export class AuthModule {}
