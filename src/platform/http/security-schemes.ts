/** Swagger security scheme names, one per kind of caller (see `setupSwagger`). */
export const SECURITY = {
  user: 'AppUserJwt',
  merchant: 'MerchantId',
  merchantSecret: 'MerchantSecret',
  service: 'ServiceToken',
  admin: 'AdminKey',
} as const;

/** Request headers carrying each credential. */
export const HEADERS = {
  authorization: 'authorization',
  service: 'x-service-token',
  admin: 'x-admin-key',
  merchantId: 'x-merchant-id',
  timestamp: 'x-timestamp',
  nonce: 'x-nonce',
  signature: 'x-signature',
} as const;
