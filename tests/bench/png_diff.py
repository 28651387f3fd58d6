"""The largest difference, in 8-bit levels, between two 8-bit RGB(A) PNGs of one size.

    python3 png_diff.py LABEL A.png B.png

Standard library only (the lent GPU machine and CI need nothing installed): zlib and the
five PNG row filters. An empty path (an image that was not made) is reported as such.
"""
import struct
import sys
import zlib


def pixels(path):
    """(width, height, channels, bytes) of a non-interlaced 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, f"{path}: {header}"
    channels = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), width * channels
    out, previous = bytearray(), bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        row = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = row[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                row[i] = (row[i] + left) & 255
            elif kind == 2:
                row[i] = (row[i] + up) & 255
            elif kind == 3:
                row[i] = (row[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                row[i] = (row[i] + best) & 255
        out += row
        previous = row
    return width, height, channels, bytes(out)


def main():
    label, a, b = sys.argv[1:4]
    if not a or not b:
        print(f"{label}: no image (see values.log)")
        return
    wa, ha, ca, pa = pixels(a)
    wb, hb, cb, pb = pixels(b)
    if (wa, ha) != (wb, hb):
        print(f"{label}: sizes differ, {wa}x{ha} and {wb}x{hb}")
        return
    rgb = lambda p, c: [p[i] for i in range(len(p)) if i % c < 3]
    diffs = [abs(x - y) for x, y in zip(rgb(pa, ca), rgb(pb, cb))]
    over = sum(d > 1 for d in diffs) / len(diffs) * 100
    print(f"{label}: largest difference {max(diffs)} levels, "
          f"{over:.2f}% of values more than 1 level apart")


if __name__ == "__main__":
    main()
