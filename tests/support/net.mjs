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
