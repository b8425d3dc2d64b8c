// Builds the app into dist/, which the Worker serves at / (the root wrangler.toml's [assets]).
// `npm run vite` serves it with hot reload instead, passing /api (and its sockets) through to a
// Worker already running on EDGENT_URL (default http://127.0.0.1:8787).
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

const worker = process.env.EDGENT_URL ?? 'http://127.0.0.1:8787';

export default defineConfig({
  plugins: [react()],
  resolve: {
    // @edgent/client and @edgent/react are links into clients/js: resolve their imports
    // (react, @edgent/client) from this package's node_modules, so there is one React.
    preserveSymlinks: true,
    dedupe: ['react', 'react-dom'],
  },
  server: {
    proxy: { '/api': { target: worker, ws: true, changeOrigin: true } },
  },
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false },
});
