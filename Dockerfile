# syntax=docker/dockerfile:1
#
# redis-pay: multi-stage image. Build:   docker build -t redis-pay .
#                                 Run:     docker run --init -p 3000:3000 -e REDIS_URL=... -e JWT_SECRET=... \
#                                            -e MERCHANT_SECRETS=... -e SERVICE_TOKENS=... -e ADMIN_API_KEYS=... redis-pay
# No secrets are baked in: production config refuses to start without them (exit 78, message names the variable).
# scripts/check-containers.sh lints this file and replays its stages without a Docker engine; keep RUN lines to
# plain `npm ...` commands so that replay stays possible.

# package.json requires node >=20.19; the node:20 line is past that. Pin a digest here for fully reproducible builds.
ARG NODE_IMAGE=node:20-bookworm-slim

# ---- deps: all dependencies (dev included, the build needs them); cached until package*.json change ----------------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
# swagger-ui-dist pulls in @scarf/scarf, whose install script phones home; switch it off.
ENV SCARF_ANALYTICS=false
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund

# ---- build: compile TypeScript to dist/, then drop dev dependencies ---------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
ENV SCARF_ANALYTICS=false
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json nest-cli.json tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY lua ./lua
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

# ---- runtime: only what `node dist/main.js` needs, owned by root and run as the unprivileged `node` user -----------
FROM ${NODE_IMAGE} AS runtime
# A larger young generation: a request allocates a lot of short-lived objects, and with V8's default (16 MB
# semi-spaces) the service spent 15-27% of its busy time in garbage collection under load; 64 MB cut its CPU per
# request by about a sixth (docs/operations.md). The benchmarks start the service with the same flag.
ENV NODE_ENV=production \
    PORT=3000 \
    NODE_OPTIONS=--max-semi-space-size=64
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/lua ./lua
COPY --from=build /app/dist ./dist
USER node
EXPOSE 3000
# /health/ready answers 503 until Redis responds and the Lua scripts are loaded. No curl in slim images: use node's fetch.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/health/ready', { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1))"]
# Exec form: node receives SIGTERM directly and drains (SHUTDOWN_GRACE_MS, default 10 s). Run with --init (compose:
# `init: true`) so a tiny init reaps zombies and forwards signals; without it node is PID 1, which also works.
CMD ["node", "dist/main.js"]
