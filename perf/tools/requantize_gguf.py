#!/usr/bin/env python3
"""Writes a copy of a GGUF model with its quantized matrices stored in another type (Q8_0, BF16
or F16), for measuring the kernels of each weight type on the same model (`ssd bench-kernels`).
The source's values are dequantized and re-encoded with the PyPI `gguf` package, so the copy
carries the source's rounding plus the new type's: a benchmark input, not a better model.

    python3 perf/tools/requantize_gguf.py SRC.gguf DST.gguf Q8_0|BF16|F16
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType as T, GGUFReader, GGUFValueType, GGUFWriter
from gguf import dequantize, quantize


def main(src, dst, kind):
    target = {"Q8_0": T.Q8_0, "BF16": T.BF16, "F16": T.F16}[kind]
    r = GGUFReader(src)
    arch = r.fields["general.architecture"]
    w = GGUFWriter(dst, bytes(arch.parts[arch.data[0]]).decode())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = f.types[0]
        if vtype == GGUFValueType.ARRAY:
            sub = f.types[1]
            if sub == GGUFValueType.STRING:
                val = [bytes(f.parts[i]).decode("utf-8", "replace") for i in f.data]
            else:
                val = [f.parts[i].tolist()[0] for i in f.data]
            w.add_key_value(name, val, vtype, sub_type=sub)
        elif vtype == GGUFValueType.STRING:
            w.add_key_value(name, bytes(f.parts[f.data[0]]).decode("utf-8", "replace"), vtype)
        else:
            w.add_key_value(name, f.parts[f.data[0]].tolist()[0], vtype)
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape.tolist())]  # numpy order, outermost first
        if t.tensor_type in (T.F32,) or len(shape) < 2:
            w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
            continue
        x = dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
        q = quantize(x, target)
        w.add_tensor(t.name, q, raw_shape=q.shape, raw_dtype=target)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
