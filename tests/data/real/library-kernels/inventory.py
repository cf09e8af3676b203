"""Which FP32 convolution and GEMM kernels a cuDNN or cuBLAS library ships for each GPU architecture, read from
the library.

A CUDA library embeds compiled modules (cubins, one per architecture) in the fatbins of its `.nv_fatbin` section,
each an ELF whose function symbols are its kernels, and optionally PTX a driver can compile for a newer GPU;
NVIDIA compresses them (LZ4 in CUDA 12, zstd in 13). A GPU loads a fatbin's module of its own major version
(an sm_89 GPU runs sm_86's or sm_80's, never sm_90's), or JIT-compiles its PTX. This reads every module and
writes, per architecture, the kernel families that decide how an FP32 convolution (cuDNN: fused Winograd
`*scudnn_winograd_128x128*`, non-fused Winograd's forward transforms, FFT, the legacy implicit GEMMs
`*scudnn_128x*`, the `sm80_xmma` FP32 implicit GEMMs and their tiles) or an FP32 GEMM (cuBLAS: the SGEMM
families and their tiles, and the names of every kernel on an FP32 GEMM's path) can run, and which architectures
the library ships PTX for.

    pip download --no-deps nvidia-cudnn-cu12==8.9.2.26 nvidia-cublas-cu12==12.1.3.1  # torch 2.1.0+cu121's
    pip install --target /tmp/fatbin lz4 zstandard                                     # not rooflow dependencies
    PYTHONPATH=/tmp/fatbin python inventory.py nvidia/cudnn/lib/libcudnn_cnn_infer.so.8 > cudnn-8.9.2.26.json
    PYTHONPATH=/tmp/fatbin python inventory.py nvidia/cublas/lib/libcublasLt.so.12 \
        nvidia/cublas/lib/libcublas.so.12 > cublas-12.1.3.1.json
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
    """(sm, ELF bytes) of every compiled module in every fatbin of ``library``; (sm, None) for its PTX."""
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
            if kind != ELF_KIND:
                yield sm, None
            elif data:  # not an empty module (cuBLAS 12.1 has 34)
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


def _tiles(names, pattern: str) -> list[list[int]]:
    """The (rows, columns) tiles the names matching ``pattern`` (two groups) carry, largest first."""
    matches = (re.search(pattern, name) for name in names)
    return [list(tile) for tile in sorted({tuple(int(x) for x in m.groups()) for m in matches if m}, reverse=True)]


# the kernels an FP32 torch.mm / nn.Linear / torch.bmm can launch through cuBLAS: SGEMMs, GEMV-like and
# long-k variants, and their split-k reduction, bias epilogue and scaling helpers
FP32_GEMM_NAME = re.compile(r"sgemm|xmma_gemm_f32f32_f32f32_f32|gemmSN|splitKreduce|globalKernel|scal_kernel")


def base_names(names) -> set[str]:
    """Each kernel's own name, without its template arguments, namespaces and parameters (what a profiler's
    kernel name starts with); a C name whole. A templated kernel also names the template argument that is a
    kernel family (cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>: the latter)."""
    result = set()
    for name in names:
        name = next((part for part in name.split("$") if part), name)  # a local copy: $<symbol>$<suffix>
        if not name.startswith("_Z"):
            result.add(name)
            continue
        # Itanium source names: <length><identifier>
        position, tokens = 2, []
        while (match := re.compile(r"(\d+)").search(name, position)):
            length, start = int(match.group(1)), match.end()
            token = name[start:start + length]
            if re.fullmatch(r"[A-Za-z_]\w*", token):
                tokens.append(token)
                position = start + length
            else:
                position = match.end()
        result.update(token for token in tokens if FP32_GEMM_NAME.search(token))
    return result


def gemm_kernels(names: set[str]) -> dict:
    """The FP32 SGEMM kernel families among one architecture's kernel names (cuBLAS), with their tiles, and the
    names of every kernel of an FP32 GEMM's path (FP32_GEMM_NAME)."""
    families = {family: rf"{family}_(\d+)x(\d+)_" for family in (
        "maxwell_sgemm", "volta_sgemm", "turing_sgemm", "ampere_sgemm", "cutlass_80_simt_sgemm")}
    families["sm80_xmma_gemm_f32f32"] = r"sm80_xmma_gemm_f32f32_f32f32_f32_\w*?tilesize(\d+)x(\d+)x"
    return {"kernels": len(names), "fp32_gemm_tiles": {family: tiles for family, pattern in families.items()
                                                       if (tiles := _tiles(names, pattern))},
            "fp32_gemm_kernels": sorted(name for name in base_names(names) if FP32_GEMM_NAME.search(name))}


def convolution_kernels(names: set[str]) -> dict:
    """The FP32 forward-convolution kernel families among one architecture's kernel names (cuDNN)."""
    xmma = {n for n in names if "xmma_fprop_implicit_gemm" in n and "_f32f32_f32f32_f32_" in n}
    return {"kernels": len(names),
            "fused_winograd": sorted(n for n in names if "scudnn_winograd" in n),
            "nonfused_winograd_forward_fp32": sorted(n for n in names if "winograd_nonfused" in n
                                                     and "winogradForward" in n and "IffE" in n),
            "legacy_implicit_gemm": sorted(n for n in names if "scudnn_128x" in n),
            "fft_forward": sum("fft2d_r2c" in n for n in names),
            "fp32_xmma_implicit_gemm_tiles": _tiles(xmma, r"tilesize(\d+)x(\d+)x\d+")}


def main(paths: list[str]) -> None:
    per_sm: dict[int, set[str]] = defaultdict(set)
    ptx: set[int] = set()
    for path in paths:
        for sm, elf in cubins(open(path, "rb").read()):
            if elf is None:
                ptx.add(sm)
            else:
                per_sm[sm].update(kernel_names(elf))
    summary = convolution_kernels if "cudnn" in paths[0] else gemm_kernels
    json.dump({"libraries": [path.rsplit("/", 1)[-1] for path in paths], "ptx_architectures": sorted(ptx),
               "architectures": {f"sm_{sm}": summary(names) for sm, names in sorted(per_sm.items())}},
              sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
