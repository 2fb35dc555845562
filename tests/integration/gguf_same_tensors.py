#!/usr/bin/env python3
"""gguf_same_tensors.py A.gguf B.gguf

Compares the tensors of two GGUF files by name, whatever their order in
each file (llama-quantize writes its own order): the same names, and for
each its shape, type and data bytes. Prints each difference and exits 1 if
there is any; prints the per-type tensor count otherwise.
Reuses gguf_compare.py's reader.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_compare  # noqa: E402


def main():
    a, b = gguf_compare.read(sys.argv[1])[3], gguf_compare.read(sys.argv[2])[3]
    # name -> (shape, type, data bytes); the offset is layout, not content
    ta = {t[0]: (t[1], t[2], t[4]) for t in a}
    tb = {t[0]: (t[1], t[2], t[4]) for t in b}
    bad = 0
    if sorted(ta) != sorted(tb):
        print('tensor names differ:', sorted(set(ta) ^ set(tb)))
        bad = 1
    counts = {}
    for name in sorted(set(ta) & set(tb)):
        if ta[name] != tb[name]:
            print('%s: differs (type %s vs %s)' % (name, ta[name][1], tb[name][1]))
            bad = 1
        counts[ta[name][1]] = counts.get(ta[name][1], 0) + 1
    print('types:', ' '.join('%s x%d' % (k, v) for k, v in sorted(counts.items())))
    sys.exit(bad)


if __name__ == '__main__':
    main()
