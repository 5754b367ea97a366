#!/usr/bin/env python3
"""Writes a small GGUF file with the PyPI `gguf` package's GGUFWriter, an implementation
independent of ours, so that gguf_reference_test.cpp can check our reader against it (a writer
and a reader written by the same hands could share a misreading of the spec).

Usage: write_gguf_reference.py OUT.gguf
Exit code 77 when numpy or gguf is not installed (the C++ test then skips).
The values here are mirrored as constants in gguf_reference_test.cpp; change both together.
"""
import sys

try:
    import numpy as np
    import gguf
except ImportError as e:  # optional dependency: report and let the caller skip
    print(f"skip: {e}", file=sys.stderr)
    sys.exit(77)


def main(out: str) -> None:
    w = gguf.GGUFWriter(out, arch="llama")
    w.add_custom_alignment(64)
    w.add_uint8("ref.u8", 250)
    w.add_int16("ref.i16", -1234)
    w.add_uint32("ref.u32", 3000000000)
    w.add_int32("ref.i32", -42)
    w.add_uint64("ref.u64", 1 << 40)
    w.add_int64("ref.i64", -(1 << 40))
    w.add_float32("ref.f32", 0.375)
    w.add_float64("ref.f64", 2.0 / 3.0)
    w.add_bool("ref.bool", True)
    w.add_string("ref.str", "h\u00e9llo")
    w.add_array("ref.ints", [1, -2, 3])             # INT32 elements
    w.add_array("ref.floats", [0.25, -1.5])         # FLOAT32 elements
    w.add_array("ref.strs", ["a", "bb", ""])
    w.add_block_count(30)

    # F32 [3 rows, 2 cols] -> ne {2, 3}; value i * 0.5 - 1 in row-major order.
    f32 = (np.arange(6, dtype=np.float32) * 0.5 - 1.0).reshape(3, 2)
    w.add_tensor("ref.f32_tensor", f32)
    # F16 [4]; all exactly representable.
    w.add_tensor("ref.f16_tensor", np.array([1.0, -2.5, 0.125, 65504.0], dtype=np.float16))
    # Q8_0 [2 rows, 64 cols] -> ne {64, 2}; value sin(0.1 * i) * (1 + row).
    x = np.sin(0.1 * np.arange(128, dtype=np.float32)).reshape(2, 64)
    x[1] *= 2.0
    q = gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("ref.q8_tensor", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: write_gguf_reference.py OUT.gguf")
    main(sys.argv[1])
