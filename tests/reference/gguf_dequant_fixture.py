#!/usr/bin/env python3
"""Writes the fixture for the kernels' independent dequantization check (GgufReference.* in
tests/unit/kernels/gguf_reference_test.cpp): random but valid blocks of every quantized type
(plus F16 / BF16 bit patterns), each with the float32 values the PyPI `gguf` package's numpy
dequantizer gives for them. When SSD_MODEL names a GGUF file, rows of two real tensors of it
are added (token_embd.weight, blk.0.ffn_down.weight).

Usage: gguf_dequant_fixture.py OUT_FILE. Exits 77 (ctest: skipped) when numpy or gguf is missing.

File format, little-endian: b"SSDGQREF" u32 version(1), then records until EOF:
  u32 name_len, name (utf-8), u32 ggml_type, u64 n_values, u64 n_bytes, raw bytes,
  n_values x float32 (gguf's dequantization of the raw bytes).
"""
import os
import struct
import sys

out_path = sys.argv[1]
if os.path.exists(out_path):
    os.remove(out_path)  # never leave a stale fixture behind a skip

try:
    import numpy as np
    from gguf import GGUFReader, quants
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T
except ImportError as e:
    print(f"SKIP: python package missing ({e}); install numpy and gguf to run this check")
    sys.exit(77)

rng = np.random.default_rng(20240611)


def f16_scales(n):
    """n f16 bit patterns: mostly |v| in [1e-4, 1] with random sign, some arbitrary finite
    patterns (all exponents, subnormals included), some subnormals."""
    mag = np.exp(rng.uniform(np.log(1e-4), np.log(1.0), n)).astype(np.float16)
    bits = mag.view(np.uint16) | (rng.integers(0, 2, n, dtype=np.uint16) << 15)
    kind = rng.uniform(size=n)
    sign = rng.integers(0, 2, n, dtype=np.uint16) << 15
    anyfinite = rng.integers(0, 0x7c00, n, dtype=np.uint16) | sign
    subnormal = rng.integers(1, 0x400, n, dtype=np.uint16)
    bits = np.where(kind < 0.1, anyfinite, np.where(kind < 0.2, subnormal, bits))
    return bits.astype(np.uint16)


def put_f16(blocks, offset, bits):
    blocks[:, offset:offset + 2] = bits.view(np.uint8).reshape(-1, 2)


def random_blocks(qtype, n_blocks):
    _, type_size = GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)  # quants: any bits
    if qtype in (T.Q8_0, T.Q4_0):
        put_f16(b, 0, f16_scales(n_blocks))
    elif qtype == T.Q4_1:
        put_f16(b, 0, f16_scales(n_blocks))
        put_f16(b, 2, f16_scales(n_blocks))
    elif qtype == T.Q4_K:
        put_f16(b, 0, f16_scales(n_blocks))
        put_f16(b, 2, f16_scales(n_blocks))
    elif qtype == T.Q6_K:
        put_f16(b, 208, f16_scales(n_blocks))
    return b


records = []


def add(name, qtype, raw_rows):
    raw_rows = np.ascontiguousarray(raw_rows, dtype=np.uint8)
    values = np.asarray(quants.dequantize(raw_rows, qtype), dtype=np.float32)
    records.append((name, int(qtype), raw_rows.tobytes(), values.reshape(-1)))


for qtype, n_blocks in ((T.Q8_0, 61), (T.Q4_0, 61), (T.Q4_1, 61), (T.Q4_K, 13), (T.Q6_K, 13)):
    add(f"random {qtype.name}", qtype, random_blocks(qtype, n_blocks).reshape(1, -1))

# F16: every bit pattern (inf, NaN, subnormals, both zeros). BF16: a random sample of patterns.
add("all F16 patterns", T.F16, np.arange(65536, dtype=np.uint16).view(np.uint8).reshape(1, -1))
bf16_bits = rng.integers(0, 65536, 4099, dtype=np.uint16)
add("random BF16", T.BF16, bf16_bits.view(np.uint8).reshape(1, -1))

model = os.environ.get("SSD_MODEL", "")
if model and os.path.isfile(model):
    reader = GGUFReader(model)
    wanted = {"token_embd.weight": [0, 1, 2, 1000, 49151],
              "blk.0.ffn_down.weight": [0, 1, 287, 575]}
    for t in reader.tensors:
        if t.name in wanted:
            rows = np.asarray(t.data)  # [rows, row_bytes] uint8 for quantized tensors
            for r in wanted[t.name]:
                if r < rows.shape[0]:
                    add(f"{model}:{t.name} row {r}", t.tensor_type, rows[r:r + 1])
    print(f"added real tensor rows from {model}")
else:
    print("SSD_MODEL unset or missing: no real-model rows in the fixture")

with open(out_path, "wb") as f:
    f.write(b"SSDGQREF" + struct.pack("<I", 1))
    for name, qtype, raw, values in records:
        nb = name.encode()
        f.write(struct.pack("<I", len(nb)) + nb)
        f.write(struct.pack("<IQQ", qtype, values.size, len(raw)))
        f.write(raw)
        f.write(values.astype("<f4").tobytes())
print(f"wrote {len(records)} records to {out_path}")
