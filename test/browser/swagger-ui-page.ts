import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { chromiumPath, NO_CHROMIUM } from './chromium-path';

/** The system Chromium, headless. No browser is downloaded: without one the suite says how to install it. */
export async function launchChromium(): Promise<Browser> {
  const path = chromiumPath();
  if (!path) throw new Error(NO_CHROMIUM);
  // As root (CI) Chromium refuses to start with its sandbox.
  return chromium.launch({ executablePath: path, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}

/** What the page shows of an executed request: the "Server response" code and body. */
export interface ShownResponse {
  status: number;
  /** The body parsed as JSON (the text when it is not JSON). */
  body: any;
  /** The curl command Swagger UI shows for the request. */
  curl: string;
}

export interface ExecuteInput {
  /** Path, query and header parameters by name; every one given is typed in, '' clears the field. */
  params?: Record<string, string>;
  /** The JSON request body, typed in whole. */
  body?: unknown;
}

/**
 * Swagger UI at /docs, driven as a person does: Authorize, expand an operation, "Try it out", type the fields,
 * Execute, read the response. Operations are found by method and path (not by tag or operation id, which are
 * presentation); every field a task needs is typed, never taken from the prefilled examples.
 */
export class SwaggerUiPage {
  private constructor(
    readonly context: BrowserContext,
    readonly page: Page,
  ) {}

  /** A fresh browser context (no credentials kept from another identity) on `${base}/docs`, every tag expanded. */
  static async open(browser: Browser, base: string): Promise<SwaggerUiPage> {
    const context = await browser.newContext();
    const page = await context.newPage();
    page.setDefaultTimeout(15_000);
    await page.goto(`${base}/docs`);
    await page.locator('.opblock-tag-section').first().waitFor();
    // With the tags collapsed (docExpansion: none) their operations are not in the page: open every one.
    for (;;) {
      const closed = page.locator('.opblock-tag-section:not(.is-open) .opblock-tag');
      if ((await closed.count()) === 0) break;
      await closed.first().click();
    }
    return new SwaggerUiPage(context, page);
  }

  close(): Promise<void> {
    return this.context.close();
  }

  /** Opens "Authorize", types each value into its scheme's field (by scheme name), applies them and closes the dialog. */
  async authorize(values: Record<string, string>): Promise<void> {
    await this.page.locator('.auth-wrapper button.authorize').click();
    const dialog = this.page.locator('.dialog-ux .modal-ux');
    await dialog.waitFor();
    // One block per scheme: its name in the heading, its field below.
    const scheme = (name: string) =>
      dialog
        .locator('h4 > code')
        .filter({ hasText: new RegExp(`^${name}$`) })
        .locator('xpath=../..');
    // Each scheme is applied with the Authorize button of its form (one form per scheme in Swagger UI 5).
    for (const [name, value] of Object.entries(values)) {
      const block = scheme(name);
      await block.locator('input').first().fill(value);
      await block.locator('xpath=ancestor::form[1]').locator('button.authorize').click();
      await block
        .locator('h6', { hasText: 'Authorized' })
        .waitFor({ timeout: 5000 })
        .catch(async (err: Error) => {
          throw new Error(`${name} not authorized; the dialog shows:\n${await dialog.innerText()}`, { cause: err });
        });
    }
    await dialog.locator('button.btn-done').first().click();
    await dialog.waitFor({ state: 'detached' });
  }

  /** The operation block of `method path` (the path as documented, e.g. `/wallet` or `/admin/wallets/{ownerId}/top-ups`). */
  operation(method: string, path: string): Locator {
    return this.page.locator(`.opblock.opblock-${method.toLowerCase()}`).filter({ has: this.page.locator(`.opblock-summary-path[data-path="${path}"]`) });
  }

  /** Expands the operation, presses "Try it out", types the input, Executes, and reads what the page shows. */
  async execute(method: string, path: string, input: ExecuteInput = {}): Promise<ShownResponse> {
    const op = this.operation(method, path);
    await op.waitFor();
    if (!(await op.evaluate((el) => el.classList.contains('is-open')))) await op.locator('.opblock-summary-control').click();
    const tryOut = op.locator('button.try-out__btn');
    if ((await tryOut.textContent())?.trim() === 'Try it out') await tryOut.click();
    await op.locator('button.execute').waitFor();
    for (const [name, value] of Object.entries(input.params ?? {})) {
      const field = op.locator(`tr[data-param-name="${name}"] input`);
      await field.fill(value);
      // Parameter fields pass their value on after a pause or when they lose focus: leave it now.
      await field.blur();
    }
    if (input.body !== undefined) {
      const text = JSON.stringify(input.body, null, 2);
      const editor = op.locator('textarea.body-param__text');
      await editor.fill(text);
      // The editor keeps its value when it loses focus; what Execute sends is what it shows.
      await editor.blur();
      if ((await editor.inputValue()) !== text) throw new Error(`the body editor of ${method} ${path} shows something else than what was typed`);
    }
    // A previous response of this operation is cleared first, so the one read below is this request's.
    const clear = op.locator('button.btn-clear');
    if (await clear.isVisible()) await clear.click();
    const live = op.locator('.live-responses-table');
    await live.waitFor({ state: 'detached' });
    await op.locator('button.execute').click();
    const status = live.locator('.response .response-col_status').first();
    await status.waitFor();
    const bodyText = (await live.locator('.response-col_description .highlight-code pre').first().textContent()) ?? '';
    const curl = (await op.locator('.curl-command, .request-snippets').first().textContent()) ?? '';
    let body: unknown = bodyText;
    try {
      body = JSON.parse(bodyText);
    } catch {
      // not JSON: kept as the text shown
    }
    // The code cell may say "Undocumented" after the code.
    return { status: parseInt((await status.textContent()) ?? '', 10), body, curl };
  }
}
