#!/usr/bin/env python3
"""gguf_compare.py A.gguf B.gguf [--ignore KEY]... [--extra PREFIX]... [--keys-only|--tensors-only]

Compares two GGUF files written independently (ours against llama.cpp's):
every key's type and value, and every tensor's name, order, shape, type and
data bytes. Keys named by --ignore are not compared; keys of A starting with
an --extra prefix may be missing from B. Prints each difference, exits 1 if
there is any. Used by tests/integration/test_convert.sh; a plain reader, no
dependency beyond the standard library.
"""
import struct
import sys

SCALAR = {0: '<B', 1: '<b', 2: '<H', 3: '<h', 4: '<I', 5: '<i', 6: '<f', 7: '<?',
          10: '<Q', 11: '<q', 12: '<d'}
BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
         10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
         20: (32, 18), 23: (256, 136), 30: (1, 2)}


def read(path):
    b = open(path, 'rb').read()
    pos = [0]

    def take(fmt):
        v = struct.unpack_from(fmt, b, pos[0])[0]
        pos[0] += struct.calcsize(fmt)
        return v

    def string():
        n = take('<Q')
        s = b[pos[0]:pos[0] + n]
        pos[0] += n
        return s

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            at = take('<I')
            n = take('<Q')
            return (at, [value(at) for _ in range(n)])
        return take(SCALAR[t])

    assert b[:4] == b'GGUF', path
    pos[0] = 4
    version = take('<I')
    n_t = take('<Q')
    n_kv = take('<Q')
    kv = {}
    order = []
    for _ in range(n_kv):
        k = string().decode()
        t = take('<I')
        kv[k] = (t, value(t))
        order.append(k)
    align = kv.get('general.alignment', (4, 32))[1]
    tensors = []
    for _ in range(n_t):
        name = string().decode()
        nd = take('<I')
        ne = [take('<Q') for _ in range(nd)]
        t = take('<I')
        off = take('<Q')
        tensors.append([name, ne, t, off])
    data = (pos[0] + align - 1) // align * align
    for tn in tensors:
        n = 1
        for d in tn[1]:
            n *= d
        blk, size = BLOCK[tn[2]]
        tn.append(b[data + tn[3]:data + tn[3] + n // blk * size])
    return version, kv, order, tensors


def main():
    args = sys.argv[1:]
    ignore, extra, files, mode = set(), [], [], 'all'
    while args:
        a = args.pop(0)
        if a == '--ignore':
            ignore.add(args.pop(0))
        elif a == '--extra':
            extra.append(args.pop(0))
        elif a in ('--keys-only', '--tensors-only'):
            mode = a[2:]
        else:
            files.append(a)
    va, ka, oa, ta = read(files[0])
    vb, kb, ob, tb = read(files[1])
    diffs = []
    if mode != 'tensors-only':
        if va != vb:
            diffs.append('version %d != %d' % (va, vb))
        for k in oa:
            if k in ignore:
                continue
            if k not in kb:
                if not any(k.startswith(p) for p in extra):
                    diffs.append('key %s only in %s' % (k, files[0]))
            elif ka[k] != kb[k]:
                diffs.append('key %s: %.120r != %.120r' % (k, ka[k], kb[k]))
        for k in ob:
            if k not in ka and k not in ignore:
                diffs.append('key %s only in %s' % (k, files[1]))
    if mode != 'keys-only':
        if [t[0] for t in ta] != [t[0] for t in tb]:
            diffs.append('tensor names/order differ:\n  %s\n  %s' %
                         ([t[0] for t in ta], [t[0] for t in tb]))
        for x, y in zip(ta, tb):
            if x[0] != y[0]:
                continue
            if x[1] != y[1] or x[2] != y[2]:
                diffs.append('tensor %s: shape/type %s/%d != %s/%d' % (x[0], x[1], x[2], y[1], y[2]))
            elif x[4] != y[4]:
                diffs.append('tensor %s: data differs' % x[0])
    for d in diffs:
        print(d)
    sys.exit(1 if diffs else 0)


if __name__ == '__main__':
    main()
