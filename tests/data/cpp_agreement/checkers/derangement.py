"""checker input output answer: the output is a derangement of 1..n, or -1 exactly when none exists (n = 1).
Exit 0 accepted, 1 wrong answer, 2 presentation error."""

import sys
from pathlib import Path

n = int(Path(sys.argv[1]).read_text().split()[0])
tokens = Path(sys.argv[2]).read_text().split()
try:
    values = [int(t) for t in tokens]
except ValueError:
    sys.exit(2)
if n == 1:
    sys.exit(0 if values == [-1] else 1)
if len(values) != n:
    sys.exit(2)
ok = sorted(values) == list(range(1, n + 1)) and all(v != i for i, v in enumerate(values, 1))
sys.exit(0 if ok else 1)
