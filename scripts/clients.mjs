// Makes sure the local @edgent/client and @edgent/react (linked from clients/js with `file:`)
// are built: installs clients/js's own dev dependencies once per lockfile (the same check and
// marker as scripts/lib/npm-once.sh), then runs its `tsc` build unless dist/ is newer than src/.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const JS = join(dirname(fileURLToPath(import.meta.url)), '..', 'clients', 'js');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const run = (args) => execFileSync(npm, args, { cwd: JS, stdio: 'inherit' });

const lockHash = createHash('sha256').update(readFileSync(join(JS, 'package-lock.json'))).digest('hex');
const marker = join(JS, 'node_modules', '.edgent-lock');
if (!existsSync(join(JS, 'node_modules', '.bin', 'tsc')) || (existsSync(marker) ? readFileSync(marker, 'utf8').trim() : '') !== lockHash) {
  console.log('[clients] installing clients/js dev dependencies (once per lockfile)');
  run(['ci', '--no-audit', '--no-fund']);
  writeFileSync(marker, `${lockHash}\n`);
}

/** The newest modification time of the files under `dir` (0 when it does not exist). */
function newest(dir) {
  if (!existsSync(dir)) return 0;
  let t = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    t = Math.max(t, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return t;
}
const built = (pkg) => {
  const out = join(JS, pkg, 'dist', 'index.js');
  return existsSync(out) && statSync(out).mtimeMs >= newest(join(JS, pkg, 'src'));
};
if (!built('client') || !built('react')) {
  console.log('[clients] building @edgent/client and @edgent/react (clients/js)');
  run(['run', 'build']);
}
