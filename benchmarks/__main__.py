"""`python -m benchmarks`: run the kbmatch benchmarks (see bench_kbmatch.py)."""

import sys

from benchmarks.bench_kbmatch import main

sys.exit(main())
