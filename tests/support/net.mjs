// Ports for processes a test or bench starts itself (wrangler dev, model servers).
import { createServer } from 'node:net';

/** A port on 127.0.0.1 that nothing listens on right now (the OS picks it). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/** Whether something may listen on `port` of 127.0.0.1 right now. */
function listenable(port) {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * A port whose next one is free too, for a process that listens on both (the demo model and
 * its weather stand-in on the port after it). The OS hands out ephemeral ports close together,
 * so the next one is often another test's: tried until both are free.
 */
export async function freePortPair() {
  for (let i = 0; i < 50; i++) {
    const port = await freePort();
    if (port < 65535 && (await listenable(port + 1))) return port;
  }
  throw new Error('no two free ports in a row on 127.0.0.1');
}
