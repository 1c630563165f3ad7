import request from 'supertest';
import { CREDS, type TestApp, userToken } from './test-app';

const ADMIN = { 'x-admin-key': CREDS.adminKey };

/** Requests to `t` as ops (the admin key). */
export const asAdmin = (t: TestApp) => ({
  post: (path: string, body?: unknown) =>
    request(t.server)
      .post(path)
      .set(ADMIN)
      .send(body as object),
  put: (path: string, body: unknown) =>
    request(t.server)
      .put(path)
      .set(ADMIN)
      .send(body as object),
  get: (path: string) => request(t.server).get(path).set(ADMIN),
});

/** Requests to `t` as the user `account` (their bearer token). */
export const asUser = (t: TestApp, account: string) => {
  const auth = { authorization: `Bearer ${userToken(account)}` };
  return {
    get: (path: string) => request(t.server).get(path).set(auth),
    post: (path: string, body?: unknown) =>
      request(t.server)
        .post(path)
        .set(auth)
        .send(body as object),
    delete: (path: string) => request(t.server).delete(path).set(auth),
  };
};
