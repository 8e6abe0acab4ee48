// The real pixel size of an image, read from its own header (PNG, JPEG, WebP), so per-pixel
// prices are charged on what the upstream produced, not on what was asked; and the size a
// vision model reads from an input image (GIF too), so its tokens are held at what they cost.

export interface ImageSize {
  format: 'png' | 'jpeg' | 'webp' | 'gif';
  width: number;
  height: number;
}

export function imageSize(b: Uint8Array): ImageSize | undefined {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  if (buf.length >= 24 && buf.readUInt32BE(0) === 0x89504e47 && buf.toString('latin1', 12, 16) === 'IHDR') {
    return { format: 'png', width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
  }
  if (buf.length >= 4 && buf[0] === 0xff && buf[1] === 0xd8) return jpegSize(buf);
  if (buf.length >= 30 && buf.toString('latin1', 0, 4) === 'RIFF' && buf.toString('latin1', 8, 12) === 'WEBP')
    return webpSize(buf);
  return undefined;
}

function jpegSize(buf: Buffer): ImageSize | undefined {
  let i = 2;
  while (i + 9 < buf.length) {
    if (buf[i] !== 0xff) return undefined;
    const marker = buf[i + 1]!;
    if (marker === 0xff) {
      i++;
      continue;
    }
    // Standalone markers carry no length.
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      i += 2;
      continue;
    }
    const len = buf.readUInt16BE(i + 2);
    // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC) hold the frame size.
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return { format: 'jpeg', height: buf.readUInt16BE(i + 5), width: buf.readUInt16BE(i + 7) };
    }
    i += 2 + len;
  }
  return undefined;
}

function webpSize(buf: Buffer): ImageSize | undefined {
  const chunk = buf.toString('latin1', 12, 16);
  if (chunk === 'VP8X') return { format: 'webp', width: 1 + buf.readUIntLE(24, 3), height: 1 + buf.readUIntLE(27, 3) };
  if (chunk === 'VP8L') {
    const bits = buf.readUInt32LE(21);
    return { format: 'webp', width: 1 + (bits & 0x3fff), height: 1 + ((bits >>> 14) & 0x3fff) };
  }
  if (chunk === 'VP8 ')
    return { format: 'webp', width: buf.readUInt16LE(26) & 0x3fff, height: buf.readUInt16LE(28) & 0x3fff };
  return undefined;
}

/**
 * The size a vision model reads from an input image (PNG, JPEG, GIF, WebP), or undefined when
 * the header is incomplete or unknown. Where a file states more than one size, the largest: of
 * a JPEG every frame header before its first scan (a decoder keeps the last), of a GIF its
 * screen and its first frame (a frame may reach past the screen).
 */
export function inputImageSize(b: Uint8Array): ImageSize | undefined {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  if (buf.length >= 4 && buf[0] === 0xff && buf[1] === 0xd8) return jpegFrameSize(buf);
  if (buf.length >= 6 && (buf.toString('latin1', 0, 6) === 'GIF87a' || buf.toString('latin1', 0, 6) === 'GIF89a'))
    return gifSize(buf);
  return imageSize(buf);
}

/** The largest frame header before the first scan; undefined before a scan is reached (a cut-off or broken file). */
function jpegFrameSize(buf: Buffer): ImageSize | undefined {
  let width = 0;
  let height = 0;
  let i = 2;
  while (i + 1 < buf.length) {
    if (buf[i] !== 0xff) return undefined;
    const marker = buf[i + 1]!;
    if (marker === 0xff) {
      i++;
      continue;
    }
    // Start of scan: every frame header is behind. A height of 0 (set later by DNL) is no size.
    if (marker === 0xda) return width > 0 && height > 0 ? { format: 'jpeg', width, height } : undefined;
    if (marker === 0xd9) return undefined;
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      i += 2;
      continue;
    }
    if (i + 3 >= buf.length) return undefined;
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      if (i + 8 >= buf.length) return undefined;
      height = Math.max(height, buf.readUInt16BE(i + 5));
      width = Math.max(width, buf.readUInt16BE(i + 7));
    }
    i += 2 + buf.readUInt16BE(i + 2);
  }
  return undefined;
}

/** The logical screen, widened to the first frame's extent; undefined before that frame is reached. */
function gifSize(buf: Buffer): ImageSize | undefined {
  if (buf.length < 13) return undefined;
  let width = buf.readUInt16LE(6);
  let height = buf.readUInt16LE(8);
  const flags = buf[10]!;
  let i = 13 + (flags & 0x80 ? 3 * (2 << (flags & 0x07)) : 0); // after the global colour table
  while (i < buf.length) {
    const block = buf[i]!;
    if (block === 0x2c) {
      if (i + 9 >= buf.length) return undefined;
      width = Math.max(width, buf.readUInt16LE(i + 1) + buf.readUInt16LE(i + 5));
      height = Math.max(height, buf.readUInt16LE(i + 3) + buf.readUInt16LE(i + 7));
      return width > 0 && height > 0 ? { format: 'gif', width, height } : undefined;
    }
    if (block !== 0x21) return undefined; // the trailer, or not a GIF
    // An extension: its label, then sub-blocks up to an empty one.
    i += 2;
    while (i < buf.length && buf[i] !== 0) i += 1 + buf[i]!;
    i++;
  }
  return undefined;
}
