"""Which FP32 forward-convolution kernels a cuDNN library ships for each GPU architecture, read from the library.

A CUDA library embeds one compiled module (cubin) per architecture in its `.nv_fatbin` section, each an ELF whose
function symbols are its kernels; cuDNN compresses them (LZ4 in 8.x, zstd in 9.x). This reads them all and
writes, per architecture, the kernel families that decide how a 3×3 stride-1 FP32 convolution can run:
fused Winograd (`*scudnn_winograd_128x128*`), non-fused Winograd's forward transforms, FFT, cuDNN's legacy
implicit GEMMs (`*scudnn_128x*`) and the `sm80_xmma` FP32 implicit GEMMs with their tiles.

    pip download --no-deps nvidia-cudnn-cu12==8.9.2.26    # the data set's cuDNN (torch 2.1.0+cu121)
    pip install --target /tmp/fatbin lz4 zstandard         # not rooflow dependencies
    PYTHONPATH=/tmp/fatbin python inventory.py nvidia/cudnn/lib/libcudnn_cnn_infer.so.8 > cudnn-8.9.2.26.json
"""
from __future__ import annotations

import json
import re
import struct
import sys
from collections import defaultdict

FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
ELF_KIND = 2
LZ4_FLAG = 0x2000
ZSTD_MAGIC = bytes.fromhex("28b52ffd")


def cubins(library: bytes):
    """(sm, ELF bytes) of every compiled module in every fatbin of ``library``."""
    import lz4.block
    import zstandard

    position = 0
    while (start := library.find(FATBIN_MAGIC, position)) >= 0:
        _version, header_size, fat_size = struct.unpack_from("<HHQ", library, start + 4)
        if header_size != 16 or fat_size > len(library):
            position = start + 4
            continue
        entry, end = start + header_size, start + header_size + fat_size
        while entry < end:
            (kind, _, entry_header, padded, _, payload, _, _, sm, _, _, flags, _,
             uncompressed) = struct.unpack_from("<HHIIIIIIIIIQQQ", library, entry)
            if entry_header == 0 or kind not in (1, 2):
                break
            data = library[entry + entry_header:entry + entry_header + payload]
            if kind == ELF_KIND:
                if data[:4] == ZSTD_MAGIC:
                    data = zstandard.ZstdDecompressor().decompress(data, max_output_size=max(uncompressed, 1 << 28))
                elif flags & LZ4_FLAG:
                    data = lz4.block.decompress(data, uncompressed_size=uncompressed)
                yield sm, data
            entry += entry_header + padded
        position = end


def kernel_names(elf: bytes) -> list[str]:
    """The function symbols of a 64-bit ELF (a cubin's kernels and device functions)."""
    section_offset, = struct.unpack_from("<Q", elf, 0x28)
    entry_size, count, _ = struct.unpack_from("<HHH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, section_offset + i * entry_size) for i in range(count)]
    names = []
    for section in sections:
        if section[1] != 2:  # SHT_SYMTAB
            continue
        strings = sections[section[6]][4]
        for i in range(section[5] // 24):
            name, info = struct.unpack_from("<IB", elf, section[4] + i * 24)
            if info & 0xF == 2:  # STT_FUNC
                names.append(elf[strings + name:elf.index(b"\0", strings + name)].decode("latin1"))
    return names


def summary(names: set[str]) -> dict:
    """The FP32 forward-convolution kernel families among one architecture's kernel names."""
    xmma = {n for n in names if "xmma_fprop_implicit_gemm" in n and "_f32f32_f32f32_f32_" in n}
    tiles = sorted({tuple(int(x) for x in re.search(r"tilesize(\d+)x(\d+)x\d+", n).groups()) for n in xmma},
                   reverse=True)
    return {"kernels": len(names),
            "fused_winograd": sorted(n for n in names if "scudnn_winograd" in n),
            "nonfused_winograd_forward_fp32": sorted(n for n in names if "winograd_nonfused" in n
                                                     and "winogradForward" in n and "IffE" in n),
            "legacy_implicit_gemm": sorted(n for n in names if "scudnn_128x" in n),
            "fft_forward": sum("fft2d_r2c" in n for n in names),
            "fp32_xmma_implicit_gemm_tiles": [list(t) for t in tiles]}


def main(path: str) -> None:
    library = open(path, "rb").read()
    per_sm: dict[int, set[str]] = defaultdict(set)
    for sm, elf in cubins(library):
        per_sm[sm].update(kernel_names(elf))
    json.dump({"library": path.rsplit("/", 1)[-1],
               "architectures": {f"sm_{sm}": summary(names) for sm, names in sorted(per_sm.items())}},
              sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
