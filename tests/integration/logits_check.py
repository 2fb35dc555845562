#!/usr/bin/env python3
"""logits_check.py GOT.f32 EXACT.f32 [BOUND]

The golden tests' logits check (test_golden_archs.sh, test_vulkan_golden.sh):
GOT and EXACT hold float32 logits of the 24 golden positions; per position,
max|got - exact| over max|exact|, the worst of those within BOUND (1e-4
unless given). Prints the largest difference and that ratio; exits non-zero
(assertion) beyond the bound or on files of different lengths.
"""
import array
import sys

N_POS = 24

got, exact = array.array('f'), array.array('f')
got.frombytes(open(sys.argv[1], 'rb').read())
exact.frombytes(open(sys.argv[2], 'rb').read())
bound = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-4
assert len(got) == len(exact), (len(got), len(exact))
V = len(exact) // N_POS
worst = wabs = 0.0
for t in range(N_POS):
    g, e = got[t * V:(t + 1) * V], exact[t * V:(t + 1) * V]
    d = max(abs(a - b) for a, b in zip(g, e))
    worst = max(worst, d / max(abs(b) for b in e))
    wabs = max(wabs, d)
print("max|diff| %.3g, /max|exact| %.3g" % (wabs, worst))
assert worst <= bound, "logits differ from the exact reference"
