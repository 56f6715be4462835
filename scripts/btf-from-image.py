#!/usr/bin/env python3
"""The kernel's BTF, cut out of its boot image, as a raw BTF file.

    scripts/btf-from-image.py VMLINUZ OUT.btf

A kernel built with CONFIG_DEBUG_INFO_BTF carries its BTF (the blob
/sys/kernel/btf/vmlinux serves) in its image. Debian's arm64 image is a
gzip-compressed Image, or an EFI zboot image (an "MZ"/"zimg" header around a
gzip or zstd payload). This finds the payload, decompresses it (zstd with the
zstd command), and takes the first
block that parses as BTF: magic 0xeb9f, version 1, a 24-byte header, type and
string sections inside the image. `bpftool btf dump file OUT.btf format c`
then gives vmlinux.h without booting the kernel (how vmlinux/arm64/vmlinux.h
was made on this x86-64 machine; see the Makefile's vmlinux-arm64).

Exits 1 with one line when no BTF is found.
"""
import gzip
import shutil
import struct
import subprocess
import sys

BTF_HEADER = struct.Struct("<HBBIIIII")   # magic, version, flags, hdr_len, type_off/len, str_off/len


def zstd(data):
    if not shutil.which("zstd"):
        raise SystemExit("btf-from-image: a zstd payload, and no zstd command (apt install zstd)")
    return subprocess.run(["zstd", "-dc"], input=data, capture_output=True, check=True).stdout


def decompress(data):
    """The kernel image inside @data (itself, when it is not compressed)."""
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    if data[:2] == b"MZ" and data[4:8] == b"zimg":
        off, size = struct.unpack_from("<II", data, 8)
        kind = data[24:32].split(b"\0")[0].decode()
        payload = data[off:off + size]
        if kind == "gzip":
            return gzip.decompress(payload)
        if kind == "zstd":
            return zstd(payload)
        raise SystemExit(f"btf-from-image: a {kind} zboot payload, which this cannot open")
    if data[:4] == b"\x28\xb5\x2f\xfd":
        return zstd(data)
    return data


def find_btf(image):
    at = 0
    while True:
        at = image.find(b"\x9f\xeb\x01\x00\x18\x00\x00\x00", at)
        if at < 0:
            return None
        _, _, _, hdr, toff, tlen, soff, slen = BTF_HEADER.unpack_from(image, at)
        end = at + hdr + max(toff + tlen, soff + slen)
        # vmlinux's BTF: types first, then strings, the strings starting with
        # the empty one and ending with a NUL; many MB of it.
        if (toff == 0 and soff == tlen and tlen > 1 << 20 and end <= len(image)
                and image[at + hdr + soff] == 0 and image[end - 1] == 0):
            return image[at:end]
        at += 1


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], "rb") as f:
        image = decompress(f.read())
    btf = find_btf(image)
    if btf is None:
        print(f"btf-from-image: no BTF in {sys.argv[1]} (a kernel without "
              "CONFIG_DEBUG_INFO_BTF?)", file=sys.stderr)
        return 1
    with open(sys.argv[2], "wb") as f:
        f.write(btf)
    print(f"btf-from-image: {len(btf)} bytes of BTF from {sys.argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
