// Polling for a condition the tests cannot be told about (a background write, a page that
// re-renders): the one loop the end-to-end and browser tests share.

/**
 * Calls `check` (which may be async) every `every` ms until it gives something truthy, and
 * resolves with that value; throws `timed out waiting for <what>` after `timeout` ms.
 */
export async function until(check, what, timeout = 10_000, every = 10) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, every));
  }
}
