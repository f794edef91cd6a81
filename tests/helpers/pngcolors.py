#!/usr/bin/env python3
# pngcolors.py - what a screenshot shows, without PIL: decodes an 8-bit RGB or
# RGBA PNG (zlib + struct, the five row filters) and prints, one a line,
#   size W H
#   ink N          pixels that are not (nearly) white
#   #rrggbb N      for each colour asked for: pixels within TOL of it per channel
# usage: pngcolors.py FILE.png [#rrggbb ...]   (TOL: env PNG_TOL, default 16)
import os
import struct
import sys
import zlib
from collections import Counter


def decode(path):
    """(width, height, bytes per pixel, rows of raw bytes) of an 8-bit RGB(A) PNG."""
    with open(path, 'rb') as f:
        data = f.read()
    if data[:8] != b'\x89PNG\r\n\x1a\n':
        sys.exit(f'{path}: not a PNG')
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack('>I4s', data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b'IHDR':
            ihdr = struct.unpack('>IIBBBBB', body)
        elif kind == b'IDAT':
            idat.append(body)
        elif kind == b'IEND':
            break
    w, h, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        sys.exit(f'{path}: depth {depth} colour type {ctype} interlace {interlace}: not handled')
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(b''.join(idat))
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if ftype == 1:      # Sub
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xff
        elif ftype == 2:    # Up
            line = bytearray((a + b) & 0xff for a, b in zip(line, prev))
        elif ftype == 3:    # Average
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xff
        elif ftype == 4:    # Paeth
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 0xff
        elif ftype != 0:
            sys.exit(f'{path}: row {y}: filter {ftype}')
        rows.append(line)
        prev = line
    return w, h, bpp, rows


def main():
    if len(sys.argv) < 2:
        sys.exit('usage: pngcolors.py FILE.png [#rrggbb ...]')
    tol = int(os.environ.get('PNG_TOL', '16'))
    w, h, bpp, rows = decode(sys.argv[1])
    seen = Counter()
    for line in rows:
        seen.update(zip(line[0::bpp], line[1::bpp], line[2::bpp]))
    print(f'size {w} {h}')
    print(f'ink {sum(n for c, n in seen.items() if min(c) < 235)}')
    for want in sys.argv[2:]:
        t = tuple(int(want.lstrip('#')[i:i + 2], 16) for i in (0, 2, 4))
        n = sum(k for c, k in seen.items() if all(abs(c[i] - t[i]) <= tol for i in range(3)))
        print(f'{want} {n}')


main()
