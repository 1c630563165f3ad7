#!/usr/bin/env bash
# The order flow with curl, against a running service with the development credentials
# (or those of .env): ops top up the app user's wallet (admin key), a merchant creates a
# master order (signed request), the app user creates a payment plan for it (bearer JWT)
# and pays it, partly from the wallet. Needs curl 7.76+ and node.
#
#   scripts/order-flow-example.sh        # BASE_URL=http://localhost:3000 ACCOUNT=acc_1001 by default
#                                        # ADMIN_KEY: the development admin key by default
set -euo pipefail
BASE_URL=${BASE_URL:-http://localhost:3000}
ACCOUNT=${ACCOUNT:-acc_1001}
ADMIN_KEY=${ADMIN_KEY:-dev-admin-key-0123456789}
cd "$(dirname "$0")/.."   # npm run sign / npm run token live here (and read .env like the service)

# Prints one field of the JSON object on standard input.
field() { node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s)[process.argv[1]]))' "$1"; }

# 0. Ops top up the user's wallet with 28.00, once per reference (201; the same reference again: 200).
WALLET=$(curl -sS --fail-with-body "$BASE_URL/admin/wallets/account:$ACCOUNT/top-ups" \
  -H "x-admin-key: $ADMIN_KEY" -H 'Content-Type: application/json' \
  --data-raw '{"amount":2800,"currency":"CNY","reference":"demo-topup-'"$(date +%s)-$RANDOM"'"}')
echo "wallet: $WALLET"

# 1. The merchant creates a master order: POST /merchant/orders, signed by the helper (201).
BODY='{"merchantOrderNo":"demo-'"$(date +%s)-$RANDOM"'","amount":12800,"currency":"CNY","subject":"Coffee beans 1 kg"}'
ORDER=$(npm run -s sign -- POST /merchant/orders "$BODY" | curl -sS --fail-with-body "$BASE_URL/merchant/orders" -H @- --data-raw "$BODY")
echo "order: $ORDER"
ORDER_ID=$(field orderId <<< "$ORDER")

# 2. The app user creates a payment plan for it: 28.00 from the wallet (method balance), then 100.00 by quickpay (201).
TOKEN=$(npm run -s token -- "$ACCOUNT")
PLAN=$(curl -sS --fail-with-body "$BASE_URL/orders/$ORDER_ID/payment-plans" \
  -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  --data-raw '{"instructions":[{"method":"balance","amount":2800},{"method":"quickpay","amount":10000}]}')
echo "plan:  $PLAN"
PLAN_ID=$(field planId <<< "$PLAN")

# 3. ...and pays it: 200 with status PAID (202 PAYING if a channel's outcome is unknown).
PAID=$(curl -sS --fail-with-body -X POST "$BASE_URL/payment-plans/$PLAN_ID/pay" -H "Authorization: Bearer $TOKEN")
echo "paid:  $PAID"
